//! Lenient parsing of streamed tool-call arguments.
//!
//! Providers stream arguments as raw JSON fragments; after each fragment pi
//! shows the best parse so far: a strict parse, else a lenient one that
//! closes open strings, arrays and objects (keeping truncated strings and
//! dropping a key whose value has not started), else `{}`. Malformed JSON
//! therefore never fails a stream. Nesting deeper than serde_json's own
//! limit (128) is not JSON here either: `{}`, never a stack overflow.

use serde_json::{Map, Value};

/// The best-effort value of possibly truncated JSON text (`{}` when nothing
/// can be made of it).
pub fn parse_streaming_json(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Map::new());
    }
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return v;
    }
    let mut p = Lenient {
        s: text.as_bytes(),
        src: text,
        i: 0,
        depth: 0,
    };
    match p.value() {
        Ok(Some(v)) => {
            p.ws();
            if p.i < p.s.len() {
                Value::Object(Map::new())
            } else {
                v
            }
        }
        _ => Value::Object(Map::new()),
    }
}

/// Tool-call arguments: [`parse_streaming_json`], but always an object.
pub fn parse_arguments(text: &str) -> Value {
    match parse_streaming_json(text) {
        v @ Value::Object(_) => v,
        _ => Value::Object(Map::new()),
    }
}

/// The text is not JSON at all (as opposed to merely cut short).
struct Invalid;

/// How deep arrays and objects may nest (serde_json's recursion limit).
const MAX_DEPTH: usize = 128;

struct Lenient<'a> {
    s: &'a [u8],
    src: &'a str,
    i: usize,
    /// Open arrays and objects around the current position.
    depth: usize,
}

impl Lenient<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    /// `Ok(None)`: the input ended before a value began.
    fn value(&mut self) -> Result<Option<Value>, Invalid> {
        self.ws();
        let Some(&c) = self.s.get(self.i) else {
            return Ok(None);
        };
        match c {
            b'{' | b'[' => {
                if self.depth == MAX_DEPTH {
                    return Err(Invalid);
                }
                self.depth += 1;
                let v = if c == b'{' {
                    self.object()
                } else {
                    self.array()
                };
                self.depth -= 1;
                v.map(Some)
            }
            b'"' => Ok(Some(Value::String(self.string()?.0))),
            b'-' | b'0'..=b'9' => Ok(self.number()),
            b't' => self.literal("true", Value::Bool(true)),
            b'f' => self.literal("false", Value::Bool(false)),
            b'n' => self.literal("null", Value::Null),
            _ => Err(Invalid),
        }
    }

    fn object(&mut self) -> Result<Value, Invalid> {
        self.i += 1;
        let mut m = Map::new();
        loop {
            self.ws();
            let Some(&c) = self.s.get(self.i) else {
                return Ok(Value::Object(m));
            };
            match c {
                b'}' => {
                    self.i += 1;
                    return Ok(Value::Object(m));
                }
                b',' => {
                    self.i += 1;
                    continue;
                }
                b'"' => {}
                _ => return Err(Invalid),
            }
            let (key, complete) = self.string()?;
            if !complete {
                return Ok(Value::Object(m));
            }
            self.ws();
            match self.s.get(self.i) {
                None => return Ok(Value::Object(m)),
                Some(b':') => self.i += 1,
                Some(_) => return Err(Invalid),
            }
            match self.value()? {
                Some(v) => {
                    m.insert(key, v);
                }
                None => return Ok(Value::Object(m)),
            }
        }
    }

    fn array(&mut self) -> Result<Value, Invalid> {
        self.i += 1;
        let mut a = Vec::new();
        loop {
            self.ws();
            let Some(&c) = self.s.get(self.i) else {
                return Ok(Value::Array(a));
            };
            match c {
                b']' => {
                    self.i += 1;
                    return Ok(Value::Array(a));
                }
                b',' => {
                    self.i += 1;
                    continue;
                }
                _ => {}
            }
            match self.value()? {
                Some(v) => a.push(v),
                None => return Ok(Value::Array(a)),
            }
        }
    }

    /// A string starting at the opening quote; `complete` is false when the
    /// input ended inside it (the text so far is kept).
    fn string(&mut self) -> Result<(String, bool), Invalid> {
        self.i += 1;
        let mut out = String::new();
        let mut run = self.i;
        while self.i < self.s.len() {
            match self.s[self.i] {
                b'"' => {
                    out.push_str(&self.src[run..self.i]);
                    self.i += 1;
                    return Ok((out, true));
                }
                b'\\' => {
                    out.push_str(&self.src[run..self.i]);
                    let Some(&e) = self.s.get(self.i + 1) else {
                        self.i = self.s.len();
                        return Ok((out, false));
                    };
                    self.i += 2;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => match self.hex4() {
                            Some(hi) => {
                                if (0xD800..0xDC00).contains(&hi)
                                    && self.s.get(self.i) == Some(&b'\\')
                                    && self.s.get(self.i + 1) == Some(&b'u')
                                {
                                    let save = self.i;
                                    self.i += 2;
                                    match self.hex4() {
                                        Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                                            let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                                            out.push(char::from_u32(c).unwrap_or('\u{fffd}'));
                                        }
                                        Some(_) => {
                                            self.i = save;
                                            out.push('\u{fffd}');
                                        }
                                        None => {
                                            self.i = self.s.len();
                                            return Ok((out, false));
                                        }
                                    }
                                } else if (0xD800..0xDC00).contains(&hi)
                                    && b"\\u".starts_with(&self.s[self.i..])
                                {
                                    // The text ends inside the pair: the
                                    // low half may still come.
                                    self.i = self.s.len();
                                    return Ok((out, false));
                                } else {
                                    out.push(char::from_u32(hi).unwrap_or('\u{fffd}'));
                                }
                            }
                            None => {
                                if self.i + 4 > self.s.len() {
                                    self.i = self.s.len();
                                    return Ok((out, false));
                                }
                                return Err(Invalid);
                            }
                        },
                        _ => return Err(Invalid),
                    }
                    run = self.i;
                }
                _ => self.i += 1,
            }
        }
        out.push_str(&self.src[run..]);
        Ok((out, false))
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.i..self.i + 4)?;
        let v = u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?;
        self.i += 4;
        Some(v)
    }

    /// A number; a truncated one (`-`, `1.`, `2e`) is cut back to its
    /// longest prefix that is a whole JSON number, or gives `None`. One
    /// pass and one parse, however long the digits run. A number too large
    /// for a double is `null` (JSON has no infinity; pi's `JSON.stringify`
    /// writes one as `null`).
    fn number(&mut self) -> Option<Value> {
        let start = self.i;
        while self.i < self.s.len()
            && matches!(
                self.s[self.i],
                b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
            )
        {
            self.i += 1;
        }
        let run = &self.src[start..self.i];
        let t = &run[..number_prefix(run.as_bytes())];
        if t.is_empty() {
            return None;
        }
        match serde_json::from_str::<Value>(t) {
            Ok(v @ Value::Number(_)) => Some(v),
            _ => Some(Value::Null),
        }
    }

    fn literal(&mut self, word: &str, v: Value) -> Result<Option<Value>, Invalid> {
        let rest = &self.src[self.i..];
        if rest.starts_with(word) {
            self.i += word.len();
            return Ok(Some(v));
        }
        let n = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        if self.i + n == self.s.len() && word.starts_with(&rest[..n]) {
            self.i += n;
            return Ok(Some(v));
        }
        Err(Invalid)
    }
}

/// The length of the longest prefix of `b` that is a complete JSON number
/// (`-`? int (`.` digits)? (`e` sign? digits)?).
fn number_prefix(b: &[u8]) -> usize {
    let digits = |mut j: usize| {
        while b.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        j
    };
    let mut i = usize::from(b.first() == Some(&b'-'));
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(i),
        _ => return 0,
    }
    if b.get(i) == Some(&b'.') {
        let j = digits(i + 1);
        if j == i + 1 {
            return i;
        }
        i = j;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let sign = i + 1 + usize::from(matches!(b.get(i + 1), Some(b'+' | b'-')));
        let j = digits(sign);
        if j > sign {
            i = j;
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strict_and_lenient() {
        assert_eq!(parse_arguments(""), json!({}));
        assert_eq!(parse_arguments("{\"a\":1}"), json!({"a":1}));
        assert_eq!(parse_arguments("{\"loc"), json!({}));
        assert_eq!(
            parse_arguments("{\"location\": \"Par"),
            json!({"location":"Par"})
        );
        assert_eq!(parse_arguments("{\"a\":"), json!({}));
        assert_eq!(parse_arguments("{\"a\": 1, \"b\""), json!({"a":1}));
        assert_eq!(
            parse_arguments("{\"a\":[1,2,{\"b\":\"c"),
            json!({"a":[1,2,{"b":"c"}]})
        );
        assert_eq!(parse_arguments("{\"a\":-"), json!({}));
        assert_eq!(parse_arguments("{\"a\":1.5e"), json!({"a":1.5}));
        assert_eq!(parse_arguments("{\"a\":tr"), json!({"a":true}));
        assert_eq!(parse_arguments("{\"a\":\"x\\"), json!({"a":"x"}));
        assert_eq!(parse_arguments("{\"a\":\"x\\u00"), json!({"a":"x"}));
        assert_eq!(
            parse_arguments("{\"a\":\"\\u00e9\\n"),
            json!({"a":"\u{e9}\n"})
        );
        assert_eq!(parse_arguments("{\"a\":\"x\",}"), json!({"a":"x"}));
        // Cut between the halves of a surrogate pair: the high half waits
        // (no U+FFFD that the finished text will not have).
        assert_eq!(parse_arguments("{\"a\":\"x\\ud83d"), json!({"a":"x"}));
        assert_eq!(parse_arguments("{\"a\":\"x\\ud83d\\"), json!({"a":"x"}));
        assert_eq!(
            parse_arguments("{\"a\":\"x\\ud83d\\ude00"),
            json!({"a":"x\u{1f600}"})
        );
        // A lone high half followed by something else is U+FFFD.
        assert_eq!(
            parse_arguments("{\"a\":\"\\ud83dz"),
            json!({"a":"\u{fffd}z"})
        );
    }

    #[test]
    fn numbers_cut_to_their_longest_whole_prefix() {
        for (t, v) in [
            ("[1.5e", json!([1.5])),
            ("[-", json!([])),
            ("[01", json!([0])),
            ("[1.e5", json!([1])),
            ("[12-3", json!([12])),
            ("[2E+", json!([2])),
            ("[2E+7", json!([2e7])),
            ("[1e400", json!([null])),
        ] {
            assert_eq!(parse_streaming_json(t), v, "{t}");
        }
        // One pass: 200k digits take no time.
        let long = format!("[{}", "9".repeat(200_000));
        assert_eq!(parse_streaming_json(&long), json!([null]));
    }

    #[test]
    fn nesting_past_the_limit_is_not_json() {
        let ok = format!("{}1", "[".repeat(MAX_DEPTH));
        assert!(parse_streaming_json(&ok).is_array());
        let deep = format!("{{\"a\":{}", "[".repeat(100_000));
        assert_eq!(parse_arguments(&deep), json!({}));
    }

    #[test]
    fn garbage_is_empty_object() {
        assert_eq!(parse_arguments("not json"), json!({}));
        assert_eq!(parse_arguments("{\"a\":1} trailing"), json!({}));
        assert_eq!(parse_arguments("[1,2"), json!({}));
        assert_eq!(parse_streaming_json("[1,2"), json!([1, 2]));
    }
}
