//! Endpoint redaction: turns a URL (a JSON-RPC or WebSocket endpoint, a
//! database) into something safe to log or put in an error message. A leaf
//! module: the rpc stage, settings, the app and metrics all use it, and it
//! uses none of them.
//!
//! Provider URLs routinely carry credentials: `user:pass@` userinfo, API keys
//! in the query (`?apikey=...`) or as a path segment (`/v3/<key>`). This
//! module strips the first two and masks path segments that look like keys.
//! It also scrubs those secrets out of free-form text (e.g. reqwest error
//! messages, which embed the full request URL). It does no I/O and never
//! logs.

use url::{Position, Url};

/// Placeholder for a path segment that looks like an API key.
const MASK: &str = "***";

/// Shortest path segment we treat as a possible API key when it mixes
/// letters and digits. Route names such as `v3`, `rpc`, `eth-mainnet` or
/// `arbitrum-one` are shorter or have no digits; provider keys (Infura,
/// Alchemy, QuickNode) are 32 characters or more, but a self-hosted proxy's
/// token can be short, and masking a route name costs far less than
/// printing a key.
const MIN_KEY_LEN: usize = 8;

/// The URL without userinfo, query or fragment, with key-like path segments
/// replaced by `***`. Unparseable input gives `<unparseable url>` rather than
/// echoing it, since it may still contain a secret.
pub fn redact_url(raw: &str) -> String {
    let Ok(mut url) = Url::parse(raw) else {
        return "<unparseable url>".to_owned();
    };
    // Both fail only for cannot-be-a-base URLs, which have no userinfo.
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    if url.cannot_be_a_base() {
        return url.scheme().to_owned() + ":" + MASK;
    }
    let path = url
        .path()
        .split('/')
        .map(|seg| if looks_like_key(seg) { MASK } else { seg })
        .collect::<Vec<_>>()
        .join("/");
    format!("{}{}", &url[..Position::BeforePath], path)
}

/// A path segment that is long, token-shaped and mixes letters and digits.
fn looks_like_key(seg: &str) -> bool {
    seg.len() >= MIN_KEY_LEN
        && seg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && seg.bytes().any(|b| b.is_ascii_digit())
        && seg.bytes().any(|b| b.is_ascii_alphabetic())
}

/// Removes every form of one URL's secrets from free-form text.
#[derive(Debug, Clone)]
pub(crate) struct Scrubber {
    redacted: String,
    /// Whole-URL spellings to replace by `redacted`, longest first.
    urls: Vec<String>,
    /// Secret fragments (password, query, key segments) to replace by `***`.
    secrets: Vec<String>,
}

impl Scrubber {
    pub(crate) fn new(raw: &str) -> Self {
        let redacted = redact_url(raw);
        let mut urls = vec![raw.to_owned()];
        let mut secrets = Vec::new();
        if let Ok(url) = Url::parse(raw) {
            urls.push(url.to_string());
            secrets.extend(url.password().map(str::to_owned));
            secrets.extend(url.query().map(str::to_owned));
            secrets.extend(
                url.path()
                    .split('/')
                    .filter(|s| looks_like_key(s))
                    .map(str::to_owned),
            );
        }
        // A URL without secrets needs no scrubbing; replacing its spellings
        // would only mangle text (e.g. `http://h:1` is a prefix of
        // `http://h:1/`, giving a double slash).
        if urls.last() == Some(&redacted) {
            urls.clear();
        }
        urls.sort_by_key(|u| std::cmp::Reverse(u.len()));
        urls.dedup();
        // Very short "secrets" would shred ordinary words; they cannot be
        // told apart from text, so only mask ones of a plausible length.
        secrets.retain(|s| s.len() >= 4);
        Self {
            redacted,
            urls,
            secrets,
        }
    }

    /// The redacted endpoint, as [`redact_url`] gives it.
    pub(crate) fn endpoint(&self) -> &str {
        &self.redacted
    }

    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for u in &self.urls {
            out = out.replace(u.as_str(), &self.redacted);
        }
        for s in &self.secrets {
            out = out.replace(s.as_str(), MASK);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_userinfo_query_and_fragment() {
        assert_eq!(
            redact_url("http://alice:s3cret@node.example:8545/?apikey=abc#frag"),
            "http://node.example:8545/"
        );
        assert_eq!(
            redact_url("http://127.0.0.1:8545"),
            "http://127.0.0.1:8545/"
        );
        assert_eq!(redact_url("ws://localhost:8546"), "ws://localhost:8546/");
    }

    #[test]
    fn masks_key_like_path_segments() {
        assert_eq!(
            redact_url("https://mainnet.infura.io/v3/9aa3d95b3bc440fa88ea12eaa4456161"),
            "https://mainnet.infura.io/v3/***"
        );
        assert_eq!(
            redact_url("https://eth-mainnet.g.alchemy.com/v2/Ab3dEfGh1JkLmNoPq-sTuVwXyZ012345"),
            "https://eth-mainnet.g.alchemy.com/v2/***"
        );
        // Route names stay readable.
        assert_eq!(
            redact_url("https://rpc.example/ethereum-mainnet/archive"),
            "https://rpc.example/ethereum-mainnet/archive"
        );
    }

    #[test]
    fn never_echoes_unparseable_input() {
        assert_eq!(redact_url("not a url user:pw@x"), "<unparseable url>");
        assert_eq!(redact_url("mailto:someone@example.com"), "mailto:***");
    }

    #[test]
    fn scrubber_removes_every_spelling() {
        let s = Scrubber::new("http://bob:hunter22@127.0.0.1:9/x?key=topsecret");
        assert_eq!(s.endpoint(), "http://127.0.0.1:9/x");
        let msg = "error sending request for url (http://bob:hunter22@127.0.0.1:9/x?key=topsecret): \
                   auth hunter22 key=topsecret";
        let clean = s.scrub(msg);
        assert!(!clean.contains("hunter22"), "{clean}");
        assert!(!clean.contains("topsecret"), "{clean}");
        assert!(clean.contains("(http://127.0.0.1:9/x)"), "{clean}");
        // A clean URL is left alone.
        let plain = Scrubber::new("http://127.0.0.1:9");
        assert_eq!(
            plain.scrub("for url (http://127.0.0.1:9/)"),
            "for url (http://127.0.0.1:9/)"
        );
    }
}
