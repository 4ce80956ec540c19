package notify

import (
	"html"
	"regexp"
	"strings"
)

// RenderMarkdown renders an email's markdown content to HTML for its HTML
// part. It understands the markdown a notification needs (paragraphs with
// line breaks, "- " lists, "#" headings, fenced code blocks, `code`,
// **bold**, *emphasis* and [links](https://…)) and nothing more. Every
// character of the source is HTML-escaped before any markup is added, so no
// tag, attribute or script of the content reaches the HTML; links keep only
// http, https and mailto targets.
func RenderMarkdown(src string) string {
	var b strings.Builder
	lines := strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n")
	var para, list []string
	flushPara := func() {
		if len(para) > 0 {
			b.WriteString("<p>" + strings.Join(para, "<br>\n") + "</p>\n")
			para = nil
		}
	}
	flushList := func() {
		if len(list) > 0 {
			b.WriteString("<ul>\n")
			for _, item := range list {
				b.WriteString("<li>" + item + "</li>\n")
			}
			b.WriteString("</ul>\n")
			list = nil
		}
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "```"):
			flushPara()
			flushList()
			var code []string
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
				code = append(code, html.EscapeString(lines[i]))
			}
			b.WriteString("<pre><code>" + strings.Join(code, "\n") + "</code></pre>\n")
		case trimmed == "":
			flushPara()
			flushList()
		case strings.HasPrefix(trimmed, "- ") || strings.HasPrefix(trimmed, "* "):
			flushPara()
			list = append(list, inline(trimmed[2:]))
		case strings.HasPrefix(trimmed, "#"):
			flushPara()
			flushList()
			level := len(trimmed) - len(strings.TrimLeft(trimmed, "#"))
			if level > 6 || !strings.HasPrefix(trimmed[level:], " ") {
				para = append(para, inline(trimmed))
				continue
			}
			tag := string(rune('0' + level))
			b.WriteString("<h" + tag + ">" + inline(strings.TrimSpace(trimmed[level:])) + "</h" + tag + ">\n")
		default:
			flushList()
			para = append(para, inline(trimmed))
		}
	}
	flushPara()
	flushList()
	return b.String()
}

var (
	mdCode      = regexp.MustCompile("`([^`]+)`")
	mdLink      = regexp.MustCompile(`\[([^\]]+)\]\(([^)\s]+)\)`)
	mdBold      = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	mdEm        = regexp.MustCompile(`(^|[^\\*])\*([^*]+)\*`)
	mdBackslash = regexp.MustCompile(`\\([\\*_\x60\[\]])`)
)

// inline renders one line's inline markup. The line is escaped first; the
// patterns then only ever wrap escaped text in tags of their own. Code
// spans are set aside so that their contents stay literal.
func inline(s string) string {
	s = html.EscapeString(s)
	var codes []string
	s = mdCode.ReplaceAllStringFunc(s, func(m string) string {
		codes = append(codes, "<code>"+m[1:len(m)-1]+"</code>")
		return "\x00" + string(rune('A'+len(codes)-1)) + "\x00"
	})
	s = mdLink.ReplaceAllStringFunc(s, func(m string) string {
		parts := mdLink.FindStringSubmatch(m)
		href := html.UnescapeString(parts[2])
		lower := strings.ToLower(href)
		if !strings.HasPrefix(lower, "https://") && !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "mailto:") {
			return m
		}
		return `<a href="` + html.EscapeString(href) + `">` + parts[1] + "</a>"
	})
	s = mdBold.ReplaceAllString(s, "<strong>$1</strong>")
	s = mdEm.ReplaceAllString(s, "$1<em>$2</em>")
	s = mdBackslash.ReplaceAllString(s, "$1")
	for i, c := range codes {
		s = strings.Replace(s, "\x00"+string(rune('A'+i))+"\x00", c, 1)
	}
	return s
}

// htmlEscape escapes text for HTML bodies and attributes.
func htmlEscape(s string) string { return html.EscapeString(s) }
