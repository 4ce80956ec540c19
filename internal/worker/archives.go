package worker

import (
	"archive/tar"
	"archive/zip"
	"compress/bzip2"
	"compress/gzip"
	"compress/zlib"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Decompression formats this worker supports for file mounts, and archive
// formats for directory mounts and cache preloads. The schema admits more
// (br, lz, lz4, mz, sz, xz, 7z, rar); those are refused as malformed-payload
// with a message naming the format, because no implementation is available
// to this build.
var (
	fileFormats    = []string{"bz2", "gz", "zst", "zz"}
	archiveFormats = []string{"tar", "tar.bz2", "tar.gz", "tar.zst", "tar.zz", "zip"}
)

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// decompressor wraps rd for the named format ("" = none).
func decompressor(format string, rd io.Reader) (io.ReadCloser, error) {
	switch format {
	case "":
		return io.NopCloser(rd), nil
	case "gz":
		zr, err := gzip.NewReader(rd)
		if err != nil {
			return nil, permanent("not gzip data: %v", err)
		}
		return zr, nil
	case "bz2":
		return io.NopCloser(bzip2.NewReader(rd)), nil
	case "zz":
		zr, err := zlib.NewReader(rd)
		if err != nil {
			return nil, permanent("not zlib data: %v", err)
		}
		return zr, nil
	case "zst":
		zr, err := zstd.NewReader(rd)
		if err != nil {
			return nil, permanent("not zstd data: %v", err)
		}
		return zr.IOReadCloser(), nil
	}
	return nil, permanent("unsupported compression format %q", format)
}

// decompressFile writes src, decompressed per format, to dst.
func decompressFile(format, src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("opening mount content: %w", err)
	}
	defer in.Close()
	rd, err := decompressor(format, in)
	if err != nil {
		return err
	}
	defer rd.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return permanent("cannot write file mount %s: %v", dst, err)
	}
	if _, err := io.Copy(out, rd); err != nil {
		out.Close()
		return permanent("decompressing (%s) into %s: %v", format, dst, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	return nil
}

func gzipStream(w io.Writer, r io.Reader) error {
	zw := gzip.NewWriter(w)
	if _, err := io.Copy(zw, r); err != nil {
		return fmt.Errorf("compressing: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compressing: %w", err)
	}
	return nil
}

// extractArchive unpacks src into dst. Extraction goes through os.Root, so
// no entry (including via symlinks planted by earlier entries) can write
// outside dst.
func extractArchive(format, src, dst string) error {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("opening extraction target %s: %w", dst, err)
	}
	defer root.Close()
	if format == "zip" {
		return extractZip(src, root)
	}
	compression, ok := strings.CutPrefix(format, "tar")
	if !ok {
		return permanent("unsupported archive format %q", format)
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("opening archive: %w", err)
	}
	defer in.Close()
	rd, err := decompressor(strings.TrimPrefix(compression, "."), in)
	if err != nil {
		return err
	}
	defer rd.Close()
	tr := tar.NewReader(rd)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return permanent("reading %s archive: %v", format, err)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue
		}
		mode := os.FileMode(hdr.Mode).Perm() | 0o200
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, mode|0o700); err != nil {
				return permanent("extracting %s: %v", hdr.Name, err)
			}
		case tar.TypeReg:
			if err := writeEntry(root, name, mode, tr); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := mkParent(root, name); err != nil {
				return err
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return permanent("extracting symlink %s: %v", hdr.Name, err)
			}
		case tar.TypeLink:
			target, err := entryName(hdr.Linkname)
			if err != nil {
				return err
			}
			if err := mkParent(root, name); err != nil {
				return err
			}
			if err := root.Link(target, name); err != nil {
				return permanent("extracting hard link %s: %v", hdr.Name, err)
			}
		default:
			// Devices, FIFOs and the like have no place in a mount.
		}
	}
}

func extractZip(src string, root *os.Root) error {
	zr, err := zip.OpenReader(src)
	if err != nil {
		return permanent("reading zip archive: %v", err)
	}
	defer zr.Close()
	for _, f := range zr.File {
		name, err := entryName(f.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue
		}
		if f.FileInfo().IsDir() {
			if err := root.MkdirAll(name, 0o755); err != nil {
				return permanent("extracting %s: %v", f.Name, err)
			}
			continue
		}
		if f.Mode()&os.ModeSymlink != 0 {
			rc, err := f.Open()
			if err != nil {
				return permanent("extracting %s: %v", f.Name, err)
			}
			target, err := io.ReadAll(io.LimitReader(rc, 4096))
			rc.Close()
			if err != nil {
				return permanent("extracting %s: %v", f.Name, err)
			}
			if err := mkParent(root, name); err != nil {
				return err
			}
			if err := root.Symlink(string(target), name); err != nil {
				return permanent("extracting symlink %s: %v", f.Name, err)
			}
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return permanent("extracting %s: %v", f.Name, err)
		}
		err = writeEntry(root, name, f.Mode().Perm()|0o200, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// entryName cleans an archive entry name and refuses absolute or escaping
// names outright (os.Root would refuse them too, with a worse message).
func entryName(n string) (string, error) {
	clean := filepath.Clean(filepath.FromSlash(strings.TrimPrefix(n, "./")))
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", permanent("archive entry %q points outside the mount directory", n)
	}
	return clean, nil
}

func mkParent(root *os.Root, name string) error {
	if dir := filepath.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return permanent("creating %s: %v", dir, err)
		}
	}
	return nil
}

func writeEntry(root *os.Root, name string, mode os.FileMode, rd io.Reader) error {
	if err := mkParent(root, name); err != nil {
		return err
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return permanent("extracting %s: %v", name, err)
	}
	if _, err := io.Copy(f, rd); err != nil {
		f.Close()
		return permanent("extracting %s: %v", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}
