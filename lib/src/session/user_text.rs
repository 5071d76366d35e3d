//! The text a listing shows of a user message entry, read straight from
//! the line's bytes: one borrowing pass that keeps only the content's
//! text (no tree of values, no copies of the other fields), for the usual
//! shapes: content a string, or an array of block objects. Every value is
//! still checked as strictly as a full parse checks it, and anything the
//! typed message would read differently (a repeated key, content of
//! another kind, a block that is not an object, a timestamp that is not a
//! number) gives `None`, and the caller parses the line in full.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// The listing text of the user message entry `line` (its string content,
/// else its text blocks joined by `sep`), when the line has a usual
/// shape; `None` sends the caller to the full parse.
pub(crate) fn user_text(line: &[u8], sep: &str) -> Option<String> {
    let entry: Entry = serde_json::from_slice(line).ok()?;
    let message = entry.message?;
    match message.content? {
        Content::Text(t) => Some(t.into_owned()),
        Content::Blocks(blocks) => {
            let mut out = String::new();
            for (i, t) in blocks.iter().enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                out.push_str(t);
            }
            Some(out)
        }
    }
}

/// A whole entry: `message` once, every other value checked and dropped.
struct Entry<'a> {
    message: Option<User<'a>>,
}

/// A `user` message: `role` (exactly `"user"`), `content`, a numeric
/// `timestamp` if any, each once; the other fields checked and dropped.
struct User<'a> {
    content: Option<Content<'a>>,
}

enum Content<'a> {
    Text(Cow<'a, str>),
    /// The texts of the `text` blocks.
    Blocks(Vec<Cow<'a, str>>),
}

/// Any JSON value, read as a full parse reads it (numbers in range,
/// strings with valid escapes) and dropped.
struct Any;

impl<'de> Deserialize<'de> for Any {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AnyVisitor)
    }
}

struct AnyVisitor;

impl<'de> Visitor<'de> for AnyVisitor {
    type Value = Any;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Any, E> {
        Ok(Any)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Any, E> {
        Ok(Any)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Any, E> {
        Ok(Any)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Any, E> {
        Ok(Any)
    }
    fn visit_str<E>(self, _: &str) -> Result<Any, E> {
        Ok(Any)
    }
    fn visit_unit<E>(self) -> Result<Any, E> {
        Ok(Any)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Any, A::Error> {
        while seq.next_element::<Any>()?.is_some() {}
        Ok(Any)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Any, A::Error> {
        while map.next_entry::<Any, Any>()?.is_some() {}
        Ok(Any)
    }
}

/// A key, borrowed when it has no escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Cow::<'a, str>::deserialize(d).map(Key)
    }
}

/// A string value, borrowed when it has no escapes; `None` for any other
/// kind of value (checked and dropped).
struct MaybeStr<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for MaybeStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MaybeStr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(MaybeStr(Some(Cow::Borrowed(s))))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(MaybeStr(Some(Cow::Owned(s.to_string()))))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(MaybeStr(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(MaybeStr(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(MaybeStr(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(MaybeStr(None))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(MaybeStr(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                AnyVisitor.visit_seq(seq).map(|_| MaybeStr(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                AnyVisitor.visit_map(map).map(|_| MaybeStr(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// Fails the fast read: the caller parses the line in full.
fn unusual<E: de::Error>() -> E {
    E::custom("unusual shape")
}

impl<'de: 'a, 'a> Deserialize<'de> for Entry<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Entry<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an entry object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry<'a>, A::Error> {
                let mut message = None;
                while let Some(Key(k)) = map.next_key()? {
                    if k == "message" {
                        if message.is_some() {
                            return Err(unusual());
                        }
                        message = Some(map.next_value::<User<'a>>()?);
                    } else {
                        map.next_value::<Any>()?;
                    }
                }
                Ok(Entry { message })
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for User<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = User<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a user message object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<User<'a>, A::Error> {
                let (mut role, mut content, mut timestamp) = (false, None, false);
                while let Some(Key(k)) = map.next_key()? {
                    match k.as_ref() {
                        "role" => {
                            let MaybeStr(r) = map.next_value()?;
                            if role || r.as_deref() != Some("user") {
                                return Err(unusual());
                            }
                            role = true;
                        }
                        "content" => {
                            if content.is_some() {
                                return Err(unusual());
                            }
                            content = Some(map.next_value::<Content<'a>>()?);
                        }
                        "timestamp" => {
                            if timestamp {
                                return Err(unusual());
                            }
                            map.next_value::<serde_json::Number>()
                                .map_err(|_| unusual::<A::Error>())?;
                            timestamp = true;
                        }
                        _ => {
                            map.next_value::<Any>()?;
                        }
                    }
                }
                if !role {
                    return Err(unusual());
                }
                Ok(User { content })
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Content<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an array of blocks")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Content<'a>, E> {
                Ok(Content::Text(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Content<'a>, E> {
                Ok(Content::Text(Cow::Owned(s.to_string())))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content<'a>, A::Error> {
                let mut texts = Vec::new();
                while let Some(Block(t)) = seq.next_element()? {
                    texts.extend(t);
                }
                Ok(Content::Blocks(texts))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A content block: its text when it is a `text` block with a string
/// `text`; `None` for any other object (checked and dropped).
struct Block<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Block<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Block<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a block object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Block<'a>, A::Error> {
                let (mut kind, mut text) = (None, None);
                while let Some(Key(k)) = map.next_key()? {
                    let slot = match k.as_ref() {
                        "type" => &mut kind,
                        "text" => &mut text,
                        _ => {
                            map.next_value::<Any>()?;
                            continue;
                        }
                    };
                    if slot.is_some() {
                        return Err(unusual());
                    }
                    *slot = Some(map.next_value::<MaybeStr<'a>>()?.0);
                }
                let is_text = matches!(kind, Some(Some(k)) if k == "text");
                Ok(Block(if is_text { text.flatten() } else { None }))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}
