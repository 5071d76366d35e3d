//! Lenient parsing of streamed tool-call arguments.
//!
//! Providers stream arguments as raw JSON fragments; after each fragment pi
//! shows the best parse so far: a strict parse, else a lenient one that
//! closes open strings, arrays and objects (keeping truncated strings and
//! dropping a key whose value has not started), else `{}`. Malformed JSON
//! therefore never fails a stream.

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

struct Lenient<'a> {
    s: &'a [u8],
    src: &'a str,
    i: usize,
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
            b'{' => self.object().map(Some),
            b'[' => self.array().map(Some),
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

    /// A number; a truncated one (`-`, `1.`, `2e`) is cut back to what
    /// parses, or gives `None`.
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
        let mut t = &self.src[start..self.i];
        while !t.is_empty() {
            if let Ok(v @ Value::Number(_)) = serde_json::from_str::<Value>(t) {
                return Some(v);
            }
            t = &t[..t.len() - 1];
        }
        None
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
    }

    #[test]
    fn garbage_is_empty_object() {
        assert_eq!(parse_arguments("not json"), json!({}));
        assert_eq!(parse_arguments("{\"a\":1} trailing"), json!({}));
        assert_eq!(parse_arguments("[1,2"), json!({}));
        assert_eq!(parse_streaming_json("[1,2"), json!([1, 2]));
    }
}
