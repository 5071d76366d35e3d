//! Strict JSON parsing that fails with the words JavaScript's `JSON.parse`
//! uses (V8, Node 22), e.g. `Unterminated string in JSON at position 21
//! (line 1 column 22)`.
//!
//! pi 1.6.0 puts those messages where a model or a user reads them: the
//! `argumentsError` of a tool call whose arguments are not JSON (and so the
//! `Invalid arguments for tool …` result the model gets back), and the error
//! of a malformed server-sent event. Parsing itself is serde_json's; only
//! when it fails does a small scanner walk the text the way V8's parser does
//! to find the first error and its position (in UTF-16 units, as JavaScript
//! counts).

use serde_json::Value;

/// Parses `text` as one JSON value; `Err` is V8's `JSON.parse` message.
///
/// A number too large for a double is valid JSON that JavaScript reads as
/// `±Infinity` and serde_json refuses; it is read here as the largest finite
/// double of its sign (no JSON value holds an infinity), so a tool sees an
/// absurd number it can refuse rather than an "invalid JSON" that is not.
pub fn parse(text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => Ok(v),
        Err(e) => {
            let mut s = Scanner {
                src: text,
                b: text.as_bytes(),
                i: 0,
                numbers: Some(Vec::new()),
            };
            if let Err(found) = s.value().and_then(|()| {
                s.ws();
                if s.i < s.b.len() {
                    Err(s.at("Unexpected non-whitespace character after JSON"))
                } else {
                    Ok(())
                }
            }) {
                return Err(found.render(text));
            }
            let clamped = clamp_huge_numbers(text, s.numbers.as_deref().unwrap_or(&[]));
            serde_json::from_str::<Value>(&clamped).map_err(|_| e.to_string())
        }
    }
}

/// `text` with every number literal (byte spans from the scanner) that
/// overflows a double replaced by the largest finite double of its sign.
fn clamp_huge_numbers(text: &str, numbers: &[(usize, usize)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for &(start, end) in numbers {
        let lit = &text[start..end];
        if lit.parse::<f64>().is_ok_and(f64::is_infinite) {
            out.push_str(&text[last..start]);
            out.push_str(if lit.starts_with('-') {
                "-1.7976931348623157e308"
            } else {
                "1.7976931348623157e308"
            });
            last = end;
        }
    }
    out.push_str(&text[last..]);
    out
}

/// V8's message for the first syntax error in `text`; `None` when V8 would
/// accept it (e.g. a lone surrogate escape, which serde_json rejects).
pub fn v8_error(text: &str) -> Option<String> {
    let mut s = Scanner {
        src: text,
        b: text.as_bytes(),
        i: 0,
        numbers: None,
    };
    let r = s.value().and_then(|()| {
        s.ws();
        if s.i < s.b.len() {
            Err(s.at("Unexpected non-whitespace character after JSON"))
        } else {
            Ok(())
        }
    });
    r.err().map(|e| e.render(text))
}

/// An error found by the scanner, before it is worded.
enum Found {
    /// The input ended where a value or a character was needed.
    End,
    /// A message "… at position N" for byte offset `at`.
    At(&'static str, usize),
    /// A character that cannot start or continue what is being read.
    Token(usize),
}

impl Found {
    fn render(&self, src: &str) -> String {
        match *self {
            Found::End => "Unexpected end of JSON input".into(),
            Found::At(what, at) => format!("{what} at position {}", position(src, at)),
            Found::Token(at) => unexpected_token(src, at),
        }
    }
}

/// `N (line L column C)` for byte offset `at`, counted in UTF-16 units;
/// `\n`, `\r` and `\r\n` end lines.
fn position(src: &str, at: usize) -> String {
    let before = &src[..at.min(src.len())];
    let pos = before.encode_utf16().count();
    let mut line = 1;
    let mut col_start = 0usize; // UTF-16 offset where the current line starts
    let mut off = 0usize;
    let mut prev_cr = false;
    for c in before.chars() {
        off += c.len_utf16();
        match c {
            '\n' if prev_cr => col_start = off,
            '\n' | '\r' => {
                line += 1;
                col_start = off;
            }
            _ => {}
        }
        prev_cr = c == '\r';
    }
    format!("{pos} (line {line} column {})", pos - col_start + 1)
}

/// `Unexpected token 'x', "…context…" is not valid JSON`: the whole text
/// when it is shorter than 21 UTF-16 units, else 10 units either side.
fn unexpected_token(src: &str, at: usize) -> String {
    let ch = src[at..].chars().next().unwrap_or(' ');
    let units: Vec<u16> = src.encode_utf16().collect();
    let pos = src[..at].encode_utf16().count();
    let len = units.len();
    const CONTEXT: usize = 10;
    let context = if len < 2 * CONTEXT + 1 {
        format!("\"{src}\"")
    } else {
        let start = pos.saturating_sub(CONTEXT);
        let end = (pos + CONTEXT).min(len);
        let piece = String::from_utf16_lossy(&units[start..end]);
        match (start == 0, end == len) {
            (true, _) => format!("\"{piece}\"..."),
            (false, true) => format!("...\"{piece}\""),
            (false, false) => format!("...\"{piece}\"..."),
        }
    };
    format!("Unexpected token '{ch}', {context} is not valid JSON")
}

struct Scanner<'a> {
    src: &'a str,
    b: &'a [u8],
    i: usize,
    /// When set, the byte span of every number literal read.
    numbers: Option<Vec<(usize, usize)>>,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn at(&self, what: &'static str) -> Found {
        Found::At(what, self.i)
    }

    /// JSON whitespace only (not every Unicode space, as JavaScript's).
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn value(&mut self) -> Result<(), Found> {
        self.ws();
        match self.peek() {
            None => Err(Found::End),
            Some(b'"') => self.string(),
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(_) => Err(Found::Token(self.i)),
        }
    }

    fn object(&mut self) -> Result<(), Found> {
        self.i += 1;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        let mut first = true;
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.at(if first {
                    "Expected property name or '}' in JSON"
                } else {
                    "Expected double-quoted property name in JSON"
                }));
            }
            self.string()?;
            self.ws();
            if self.peek() != Some(b':') {
                return Err(self.at("Expected ':' after property name in JSON"));
            }
            self.i += 1;
            self.value()?;
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.i += 1;
                    self.ws();
                    first = false;
                }
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(self.at("Expected ',' or '}' after property value in JSON")),
            }
        }
    }

    fn array(&mut self) -> Result<(), Found> {
        self.i += 1;
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.value()?;
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(self.at("Expected ',' or ']' after array element in JSON")),
            }
        }
    }

    fn string(&mut self) -> Result<(), Found> {
        self.i += 1;
        loop {
            match self.peek() {
                None => return Err(self.at("Unterminated string in JSON")),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.i += 1;
                    match self.peek() {
                        None => return Err(Found::End),
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.i += 1,
                        Some(b'u') => {
                            self.i += 1;
                            for _ in 0..4 {
                                match self.peek() {
                                    Some(c) if c.is_ascii_hexdigit() => self.i += 1,
                                    _ => return Err(self.at("Bad Unicode escape in JSON")),
                                }
                            }
                        }
                        Some(_) => return Err(self.at("Bad escaped character in JSON")),
                    }
                }
                Some(c) if c < 0x20 => {
                    return Err(self.at("Bad control character in string literal in JSON"))
                }
                Some(_) => {
                    // Skip one whole UTF-8 character.
                    let len = self.src[self.i..].chars().next().map_or(1, char::len_utf8);
                    self.i += len;
                }
            }
        }
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
    }

    fn number(&mut self) -> Result<(), Found> {
        let start = self.i;
        self.number_literal()?;
        if let Some(spans) = &mut self.numbers {
            spans.push((start, self.i));
        }
        Ok(())
    }

    fn number_literal(&mut self) -> Result<(), Found> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.i += 1;
                if matches!(self.peek(), Some(b'0'..=b'9')) {
                    return Err(self.at("Unexpected number in JSON"));
                }
            }
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.at("No number after minus sign in JSON")),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.at("Unterminated fractional number in JSON"));
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.at("Exponent part is missing a number in JSON"));
            }
            self.digits();
        }
        Ok(())
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Found> {
        for &w in word {
            match self.peek() {
                None => return Err(Found::End),
                Some(c) if c == w => self.i += 1,
                Some(_) => return Err(Found::Token(self.i)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages recorded from Node 22's `JSON.parse` (the oracle test in
    /// lib/tests/providers.rs checks many more cases live).
    #[test]
    fn numbers_beyond_a_double_are_clamped_not_errors() {
        let v = parse(r#"{"a": 1e400, "b": [-2E+999, 1.5], "c": "1e400"}"#).unwrap();
        assert_eq!(v["a"].as_f64(), Some(f64::MAX));
        assert_eq!(v["b"][0].as_f64(), Some(f64::MIN));
        assert_eq!(v["b"][1].as_f64(), Some(1.5));
        assert_eq!(v["c"], "1e400");
        assert!(parse(r#"{"a": NaN}"#)
            .unwrap_err()
            .starts_with("Unexpected token 'N'"));
    }

    #[test]
    fn v8_wording() {
        let cases = [
            ("", "Unexpected end of JSON input"),
            (
                "{\"command\": \"echo hel",
                "Unterminated string in JSON at position 21 (line 1 column 22)",
            ),
            (
                "{\"a\":1",
                "Expected ',' or '}' after property value in JSON at position 6 (line 1 column 7)",
            ),
            (
                "not json at all",
                "Unexpected token 'o', \"not json at all\" is not valid JSON",
            ),
            (
                "not json at all, this is a much longer text that goes on and on",
                "Unexpected token 'o', \"not json at\"... is not valid JSON",
            ),
            (
                "{\"a\"\n:\n\"x",
                "Unterminated string in JSON at position 9 (line 3 column 3)",
            ),
            (
                "{\"a\":\"\u{1f600}",
                "Unterminated string in JSON at position 8 (line 1 column 9)",
            ),
            (
                "{\"a\":01}",
                "Unexpected number in JSON at position 6 (line 1 column 7)",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input).unwrap_err(), want, "{input:?}");
        }
        assert_eq!(parse("{\"a\":[1]}").unwrap()["a"][0], 1);
    }
}
