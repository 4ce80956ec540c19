package kubetest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// ociArchive writes an OCI image layout, as a tar archive, of one
// uncompressed layer and the given entrypoint, named ref: what
// `ctr images import` reads, so a node gets images without a registry.
func ociArchive(ref string, layer []byte, entrypoint []string) ([]byte, error) {
	blobs := map[string][]byte{}
	add := func(b []byte) (string, int) {
		sum := sha256.Sum256(b)
		d := "sha256:" + hex.EncodeToString(sum[:])
		blobs[d] = b
		return d, len(b)
	}
	layerDigest, layerSize := add(layer)
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": entrypoint, "Env": []string{"PATH=/bin:/usr/bin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	if err != nil {
		return nil, err
	}
	configDigest, configSize := add(config)
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": configDigest, "size": configSize},
		"layers": []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layerDigest, "size": layerSize}},
	})
	if err != nil {
		return nil, err
	}
	manifestDigest, manifestSize := add(manifest)
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []any{map[string]any{
			"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifestDigest, "size": manifestSize,
			"platform":    map[string]string{"architecture": "amd64", "os": "linux"},
			"annotations": map[string]string{"io.containerd.image.name": ref},
		}},
	})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	file := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return nil, err
	}
	if err := file("index.json", index); err != nil {
		return nil, err
	}
	for d, b := range blobs {
		if err := file("blobs/sha256/"+d[len("sha256:"):], b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// FileLayer is a layer holding one executable file at path (a static
// binary) and an empty /tmp.
func FileLayer(path string, data []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777, ModTime: time.Now()}); err != nil {
		return nil, err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: 0o755, Size: int64(len(data)), ModTime: time.Now()}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ImportImage puts an image of one layer into the node's containerd
// (namespace k8s.io, where the kubelet looks), named ref as the kubelet
// names images ("docker.io/library/name:tag" for "name:tag"); Pods use it
// with imagePullPolicy Never.
func (c *Cluster) ImportImage(ref string, layer []byte, entrypoint []string) error {
	if c.node == nil {
		return fmt.Errorf("no node: the cluster was started without a kubelet")
	}
	archive, err := ociArchive(ref, layer, entrypoint)
	if err != nil {
		return fmt.Errorf("writing the image %s: %w", ref, err)
	}
	path := filepath.Join(c.node.dir, "image.tar")
	if err := os.WriteFile(path, archive, 0o600); err != nil {
		return err
	}
	defer os.Remove(path)
	out, err := exec.Command(filepath.Join(BinDir(), "ctr"), "--address", c.node.socket, "--namespace", "k8s.io",
		"images", "import", "--platform", "linux/amd64", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %v: %s", ref, err, out)
	}
	return nil
}
