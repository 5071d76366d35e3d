//! The URL rules of MCP, on URLs parsed as pi parses them (the WHATWG URL
//! standard, which the `url` crate implements), never split by hand: a
//! server's `url` must be http or https; credentials (an `auth.provider`
//! key, OAuth metadata and token requests) go only to an https URL or to
//! http on loopback; the OAuth callback is http on loopback. "Loopback"
//! is pi 1.6.0's list: the parsed host is `localhost`, `127.0.0.1` or
//! `[::1]` — so `http://127.0.0.1:x@evil/` (host `evil`), `127.0.0.2` and
//! `localhost.` are not, while `http://127.1/` and `http://LOCALHOST/`
//! (the same hosts once parsed) are. A URL with a user name or password is
//! never requested: pi's fetch refuses it, and a client that sent it would
//! hand the credentials to the server in a header.

use std::net::{Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// pi's text for where credentials may go.
pub const SECURE_URL: &str = "an https URL, or http on localhost, 127.0.0.1, or [::1]";

/// `u` parsed, when it is an `http` or `https` URL.
pub fn http_url(u: &str) -> Option<Url> {
    Url::parse(u)
        .ok()
        .filter(|p| matches!(p.scheme(), "http" | "https"))
}

/// Whether the parsed host is `localhost`, `127.0.0.1` or `[::1]`.
pub fn is_loopback(u: &Url) -> bool {
    match u.host() {
        Some(Host::Domain(d)) => d == "localhost",
        Some(Host::Ipv4(ip)) => ip == Ipv4Addr::LOCALHOST,
        Some(Host::Ipv6(ip)) => ip == Ipv6Addr::LOCALHOST,
        None => false,
    }
}

/// Where credentials may be sent: an https URL, or http on loopback.
pub fn is_secure(u: &str) -> bool {
    http_url(u).is_some_and(|p| p.scheme() == "https" || is_loopback(&p))
}

/// An OAuth callback pi accepts: http on loopback without a query or a
/// fragment (an empty `?` or `#` is none, as in pi).
pub fn is_callback(u: &str) -> bool {
    http_url(u).is_some_and(|p| {
        p.scheme() == "http"
            && is_loopback(&p)
            && p.query().is_none_or(str::is_empty)
            && p.fragment().is_none_or(str::is_empty)
    })
}

/// pi's error for a server URL with a user name or password (its fetch
/// refuses such a URL before sending anything); `None` for any other.
pub fn credentials_error(u: &str) -> Option<String> {
    let p = Url::parse(u).ok()?;
    (!p.username().is_empty() || p.password().is_some())
        .then(|| format!("Request cannot be constructed from a URL that includes credentials: {u}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each verdict is pi 1.6.0's for the same text (`pi mcp list` on an
    /// `auth.provider` entry, and on an `oauth.callbackUrl`).
    #[test]
    fn secure_and_callback_urls_as_pi_judges_them() {
        for (u, secure) in [
            ("https://example.com/mcp", true),
            ("HTTPS://example.com/mcp", true),
            ("https:example.com/mcp", true),
            ("http://127.0.0.1:9/mcp", true),
            ("http://localhost:9/mcp", true),
            ("http://LOCALHOST:9/mcp", true),
            ("http://[::1]:9/mcp", true),
            ("http://[0:0:0:0:0:0:0:1]:9/mcp", true),
            ("http://127.1:9/mcp", true),
            ("http://0x7f000001:9/mcp", true),
            ("http://127.0.0.1.:9/mcp", true),
            ("http://127.0.0.1\\@evil.com/mcp", true),
            ("http://user:pw@127.0.0.1:9/mcp", true),
            ("http://127.0.0.1:x@127.0.0.2:9/mcp", false),
            ("http://127.0.0.1:x@evil.com/mcp", false),
            ("http://evil.com\\@127.0.0.1/mcp", false),
            ("http://127.0.0.1%2f@evil.com/", false),
            ("http://127.0.0.2/mcp", false),
            ("http://localhost./mcp", false),
            ("http://foo.localhost/mcp", false),
            ("http://[::ffff:127.0.0.1]/mcp", false),
            ("http://example.com/mcp", false),
            ("ftp://127.0.0.1/", false),
            ("https://exa mple.com/mcp", false),
            ("http://", false),
        ] {
            assert_eq!(is_secure(u), secure, "{u}");
        }
        for (u, ok) in [
            ("http://127.0.0.1:8080/cb", true),
            ("http://user@localhost:8080/cb", true),
            ("HTTP://LOCALHOST/cb", true),
            ("http://127.1/cb", true),
            ("http://[::1]/cb", true),
            ("http://localhost/cb#", true),
            ("http://127.0.0.1\\@evil.com/cb", true),
            ("http://127.0.0.1:x@evil.com/cb", false),
            ("https://localhost/cb", false),
            ("http://localhost/cb?x", false),
            ("http://localhost/cb#x", false),
        ] {
            assert_eq!(is_callback(u), ok, "{u}");
        }
    }

    #[test]
    fn credentials_in_a_url_are_named() {
        assert_eq!(
            credentials_error("http://u:p@127.0.0.1:9/mcp").as_deref(),
            Some("Request cannot be constructed from a URL that includes credentials: http://u:p@127.0.0.1:9/mcp")
        );
        assert!(credentials_error("https://u@example.com/").is_some());
        assert!(credentials_error("https://example.com/a@b").is_none());
        assert!(credentials_error("http://127.0.0.1:9/mcp").is_none());
    }
}
