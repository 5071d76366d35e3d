//! A JSON number that remembers whether it was written as an integer.
//!
//! pi is JavaScript: it writes `0` and `0.003` alike as "number". Reading a
//! cost of `0` into an `f64` and writing it back would produce `0.0` — the
//! same value, but a different JSON token. `Num` keeps the original token.

use serde::{Deserialize, Serialize};

/// A JSON number kept exactly as read; use [`Num::as_f64`] / [`Num::as_u64`]
/// for arithmetic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Num(pub serde_json::Number);

impl Num {
    /// The value as a float (integers convert exactly up to 2^53).
    pub fn as_f64(&self) -> f64 {
        self.0.as_f64().unwrap_or(0.0)
    }

    /// The value as an unsigned integer; floats are truncated, negatives are 0.
    pub fn as_u64(&self) -> u64 {
        match self.0.as_u64() {
            Some(v) => v,
            None => {
                let f = self.as_f64();
                if f.is_finite() && f > 0.0 {
                    f as u64
                } else {
                    0
                }
            }
        }
    }

    /// The value as a signed integer (used for epoch-millisecond timestamps).
    pub fn as_i64(&self) -> i64 {
        self.0.as_i64().unwrap_or_else(|| self.as_f64() as i64)
    }

    /// An integer number.
    pub fn int(v: u64) -> Num {
        Num(v.into())
    }

    /// A signed integer number.
    pub fn signed(v: i64) -> Num {
        Num(v.into())
    }

    /// A float, written as JavaScript would: integral values without `.0`.
    pub fn float(v: f64) -> Num {
        if v.fract() == 0.0 && v.abs() < 9.007_199_254_740_992e15 {
            return Num((v as i64).into());
        }
        Num(serde_json::Number::from_f64(v).unwrap_or_else(|| 0.into()))
    }
}

impl Default for Num {
    fn default() -> Self {
        Num(0.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_integer_and_float_tokens() {
        let n: Num = serde_json::from_str("0").unwrap();
        assert_eq!(serde_json::to_string(&n).unwrap(), "0");
        let n: Num = serde_json::from_str("0.0035").unwrap();
        assert_eq!(serde_json::to_string(&n).unwrap(), "0.0035");
        assert_eq!(serde_json::to_string(&Num::float(3.0)).unwrap(), "3");
        assert_eq!(serde_json::to_string(&Num::float(0.25)).unwrap(), "0.25");
    }
}
