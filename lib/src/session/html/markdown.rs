//! Markdown to HTML for the exported page, safe for text a model or a file
//! wrote: CommonMark (tables, strikethrough, task lists) rendered by
//! pulldown-cmark, with every raw HTML block or tag shown as text, links
//! kept only to web, mail and in-page targets, and images turned into links
//! (the page loads nothing from the network).

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd};

/// Whether a link target may stay a link: `http(s):`, `mailto:`, an
/// in-page `#anchor` or a relative path. Anything else with a scheme
/// (`javascript:`, `data:`, `file:`, `vbscript:` …) does not.
fn safe_url(url: &str) -> bool {
    let u = url.trim_start();
    let lower = u.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("mailto:")
    {
        return true;
    }
    // A scheme is letters, digits, `+`, `-`, `.` before the first `:`,
    // and comes before any `/`, `?` or `#`. Browsers also drop tabs and
    // newlines inside a scheme, so any control character disqualifies.
    if u.chars().any(|c| c.is_control()) {
        return false;
    }
    match u.find([':', '/', '?', '#']) {
        Some(i) => u.as_bytes()[i] != b':',
        None => true,
    }
}

fn link_target(url: CowStr<'_>) -> CowStr<'_> {
    if safe_url(&url) {
        url
    } else {
        CowStr::Borrowed("#")
    }
}

/// `text` (Markdown) as an HTML fragment.
pub fn to_html(text: &str) -> String {
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let events = Parser::new_ext(text, opts).map(|ev| match ev {
        // Raw HTML is shown, never interpreted.
        Event::Html(h) | Event::InlineHtml(h) => Event::Text(h),
        // An image would be fetched when the page opens: it becomes a link
        // whose text is the image's description.
        Event::Start(
            Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }
            | Tag::Image {
                link_type,
                dest_url,
                title,
                id,
            },
        ) => Event::Start(Tag::Link {
            link_type,
            dest_url: link_target(dest_url),
            title,
            id,
        }),
        Event::End(TagEnd::Image) => Event::End(TagEnd::Link),
        other => other,
    });
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    pulldown_cmark::html::push_html(&mut out, events);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_markdown() {
        let h = to_html("# Title\n\nSome **bold** and `code`.\n\n```rust\nfn main() {}\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n");
        assert!(h.contains("<h1>Title</h1>"), "{h}");
        assert!(h.contains("<strong>bold</strong>"), "{h}");
        assert!(h.contains("<code>code</code>"), "{h}");
        assert!(
            h.contains("<pre><code class=\"language-rust\">fn main() {}"),
            "{h}"
        );
        assert!(h.contains("<table>"), "{h}");
    }

    #[test]
    fn raw_html_is_text() {
        let h = to_html("<script>alert(1)</script>\n\nhi <img src=x onerror=alert(1)> <b>b</b>");
        assert!(!h.contains("<script"), "{h}");
        assert!(!h.contains("<img"), "{h}");
        assert!(!h.contains("<b>"), "{h}");
        assert!(h.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{h}");
        assert!(h.contains("&lt;img src=x onerror=alert(1)&gt;"), "{h}");
    }

    #[test]
    fn unsafe_links_are_dropped() {
        for md in [
            "[x](javascript:alert(1))",
            "[x](JavaScript:alert(1))",
            "[x](java\tscript:alert(1))",
            "[x](data:text/html;base64,PHNjcmlwdD4=)",
            "[x](vbscript:msgbox)",
            "<javascript:alert(1)>",
            "[x]: javascript:alert(1)\n\n[x]",
        ] {
            let h = to_html(md);
            let hrefs: Vec<&str> = h.split("href=\"").skip(1).collect();
            for rest in hrefs {
                assert!(rest.starts_with("#\""), "{md}: {h}");
            }
        }
        assert!(to_html("[x](javascript:alert(1))").contains("<a href=\"#\">x</a>"));
        assert!(to_html("[x](https://example.com/a?b=1)")
            .contains("href=\"https://example.com/a?b=1\""));
        assert!(to_html("[x](#top)").contains("href=\"#top\""));
        assert!(to_html("[x](docs/a.md)").contains("href=\"docs/a.md\""));
        assert!(to_html("[x](mailto:a@b.c)").contains("href=\"mailto:a@b.c\""));
    }

    #[test]
    fn images_become_links() {
        let h = to_html("![a cat](https://example.com/cat.png)");
        assert!(!h.contains("<img"), "{h}");
        assert!(
            h.contains("<a href=\"https://example.com/cat.png\">a cat</a>"),
            "{h}"
        );
    }

    #[test]
    fn attributes_are_escaped() {
        let h =
            to_html("[x](https://e.com/\"onmouseover=alert(1) \"t\")\n\n```a\"onload=x\nz\n```");
        assert!(!h.contains("\"onmouseover"), "{h}");
        assert!(!h.contains("\"onload"), "{h}");
    }
}
