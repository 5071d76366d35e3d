//! Writing a struct as a JSON object with a tag key first (`"type"`,
//! `"role"`): a serializer that wraps the real one, opens the object, writes
//! the tag entry, then lets the struct write its own fields (and its
//! flattened `extra` map) into the same object. The struct goes straight to
//! the output in one pass; nothing is built in between.

use serde::ser::{Error, Impossible, Serialize, SerializeMap, SerializeStruct, Serializer};

/// Serialises `inner` (a struct without its tag) with `tag_key: tag` first.
pub(crate) fn serialize_tagged<S: Serializer, T: Serialize + ?Sized>(
    s: S,
    tag_key: &'static str,
    tag: &str,
    inner: &T,
) -> Result<S::Ok, S::Error> {
    inner.serialize(Tagged {
        inner: s,
        key: tag_key,
        tag,
    })
}

const NOT_AN_OBJECT: &str = "tagged value must be an object";

/// The wrapping serializer: accepts only what writes an object (a struct,
/// a map, or a newtype around one).
struct Tagged<'a, S> {
    inner: S,
    key: &'static str,
    tag: &'a str,
}

impl<S: Serializer> Tagged<'_, S> {
    fn open(self, len: Option<usize>) -> Result<S::SerializeMap, S::Error> {
        let mut m = self.inner.serialize_map(len.map(|n| n + 1))?;
        m.serialize_entry(self.key, self.tag)?;
        Ok(m)
    }
}

/// A struct's fields written as the entries of the already opened object.
struct Fields<M>(M);

impl<M: SerializeMap> SerializeStruct for Fields<M> {
    type Ok = M::Ok;
    type Error = M::Error;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), M::Error> {
        self.0.serialize_entry(key, value)
    }

    fn end(self) -> Result<M::Ok, M::Error> {
        self.0.end()
    }
}

macro_rules! refuse {
    ($($name:ident($($arg:ty),*);)*) => {
        $(fn $name(self, $(_: $arg),*) -> Result<S::Ok, S::Error> {
            Err(S::Error::custom(NOT_AN_OBJECT))
        })*
    };
}

impl<'a, S: Serializer> Serializer for Tagged<'a, S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Impossible<S::Ok, S::Error>;
    type SerializeTuple = Impossible<S::Ok, S::Error>;
    type SerializeTupleStruct = Impossible<S::Ok, S::Error>;
    type SerializeTupleVariant = Impossible<S::Ok, S::Error>;
    type SerializeMap = S::SerializeMap;
    type SerializeStruct = Fields<S::SerializeMap>;
    type SerializeStructVariant = Impossible<S::Ok, S::Error>;

    refuse! {
        serialize_bool(bool);
        serialize_i8(i8);
        serialize_i16(i16);
        serialize_i32(i32);
        serialize_i64(i64);
        serialize_u8(u8);
        serialize_u16(u16);
        serialize_u32(u32);
        serialize_u64(u64);
        serialize_f32(f32);
        serialize_f64(f64);
        serialize_char(char);
        serialize_str(&str);
        serialize_bytes(&[u8]);
        serialize_none();
        serialize_unit();
        serialize_unit_struct(&'static str);
        serialize_unit_variant(&'static str, u32, &'static str);
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<S::Ok, S::Error> {
        Err(S::Error::custom(NOT_AN_OBJECT))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<S::Ok, S::Error> {
        Err(S::Error::custom(NOT_AN_OBJECT))
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        Err(S::Error::custom(NOT_AN_OBJECT))
    }

    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, S::Error> {
        Err(S::Error::custom(NOT_AN_OBJECT))
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, S::Error> {
        Err(S::Error::custom(NOT_AN_OBJECT))
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        Err(S::Error::custom(NOT_AN_OBJECT))
    }

    fn serialize_map(self, len: Option<usize>) -> Result<S::SerializeMap, S::Error> {
        self.open(len)
    }

    fn serialize_struct(
        self,
        _: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        self.open(Some(len)).map(Fields)
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        Err(S::Error::custom(NOT_AN_OBJECT))
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;
    use serde_json::{json, Map, Value};

    #[derive(Serialize)]
    struct Plain {
        a: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        b: Option<String>,
    }

    #[derive(Serialize)]
    struct Flat {
        a: u32,
        #[serde(flatten)]
        extra: Map<String, Value>,
    }

    struct Wrap<T>(T);
    impl<T: Serialize> Serialize for Wrap<T> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            serialize_tagged(s, "type", "t", &self.0)
        }
    }

    #[test]
    fn tag_first_then_fields_then_flattened_extra() {
        let p = Wrap(Plain { a: 1, b: None });
        assert_eq!(serde_json::to_string(&p).unwrap(), r#"{"type":"t","a":1}"#);
        let mut extra = Map::new();
        extra.insert("z".into(), json!([1, {"y": null}]));
        extra.insert("c".into(), json!("x"));
        let f = Wrap(Flat { a: 2, extra });
        let line = r#"{"type":"t","a":2,"z":[1,{"y":null}],"c":"x"}"#;
        assert_eq!(serde_json::to_string(&f).unwrap(), line);
        // The same object when built as a value.
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v.to_string(), line);
        let empty = Wrap(Flat {
            a: 3,
            extra: Map::new(),
        });
        assert_eq!(
            serde_json::to_string(&empty).unwrap(),
            r#"{"type":"t","a":3}"#
        );
    }

    #[test]
    fn anything_but_an_object_is_refused() {
        assert!(serde_json::to_string(&Wrap(3)).is_err());
        assert!(serde_json::to_string(&Wrap("s")).is_err());
        assert!(serde_json::to_string(&Wrap(vec![1])).is_err());
    }
}
