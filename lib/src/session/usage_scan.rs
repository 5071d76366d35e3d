//! Reading the token and cost totals of a `usage` object straight from the
//! bytes of a session line, for listings that must not parse every line:
//! the last structural `"usage":{` of the line (one cannot occur inside a
//! JSON string, where quotes are escaped), read by a one-pass reader for
//! the layout pi writes, a small general reader for plain numbers in any
//! key order, and serde for anything else. All three give the totals
//! [`Usage`] gives.

use memchr::memmem;

use crate::format::Usage;

pub(crate) const USAGE_KEY: &[u8] = b"\"usage\":{";

/// The totals of a usage: `totalTokens` (else the sum of its parts) and
/// the total cost.
pub(crate) fn usage_totals(u: &Usage) -> (u64, f64) {
    let total = u.total_tokens.as_u64();
    let tokens = if total > 0 {
        total
    } else {
        u.input.as_u64() + u.output.as_u64() + u.cache_read.as_u64() + u.cache_write.as_u64()
    };
    (tokens, u.cost.total.as_f64())
}

/// The totals of the line's last structural `"usage":{` object: read
/// directly when it has pi's shape (numbers, and `cost` holding numbers),
/// else through serde. `None` when the line has none that parses.
pub(crate) fn line_usage(line: &[u8], finder: &memmem::FinderRev<'_>) -> Option<(u64, f64)> {
    let pos = rfind_usage(line, finder)?;
    let start = pos + USAGE_KEY.len() - 1;
    let obj = &line[start..];
    if let Some(t) = short_usage(obj)
        .or_else(|| exact_usage(obj))
        .or_else(|| fast_usage(obj))
    {
        return Some(t);
    }
    let mut it = serde_json::Deserializer::from_slice(&line[start..]).into_iter::<Usage>();
    match it.next() {
        Some(Ok(u)) => Some(usage_totals(&u)),
        _ => None,
    }
}

/// The last `"usage":{` of a line. The key holds one `g`, and nothing pi
/// writes after an assistant message's usage (`stopReason`, `timestamp`,
/// the cost keys) has one, so jumping between `g`s from the end (`memrchr`,
/// vectorised) finds it in a few steps; a reverse substring search walks
/// every byte. Same result as `finder.rfind`, which lines without a `g`
/// fall back to.
fn rfind_usage(line: &[u8], finder: &memmem::FinderRev<'_>) -> Option<usize> {
    const G: usize = 4; // USAGE_KEY[4] == b'g'
    let mut end = line.len();
    for _ in 0..8 {
        let g = memchr::memrchr(b'g', &line[..end])?;
        if g >= G && line[g - G..].starts_with(USAGE_KEY) {
            return Some(g - G);
        }
        end = g;
    }
    // Many `g`s (an error message after the usage): the plain search, over
    // the part not yet ruled out (an occurrence may straddle `end`).
    finder.rfind(&line[..(end + USAGE_KEY.len()).min(line.len())])
}

/// How many bytes of a usage object [`short_usage`] copies.
const SHORT: usize = 256;

/// The zero-padded copy [`short_usage`] reads.
type Padded = [u8; SHORT + 32];

/// [`exact_usage`] for its usual case, every number short (at most 19
/// digits before a point and 31 after, no sign): read from a zero-padded
/// copy of the object's first [`SHORT`] bytes, so every step is a
/// fixed-size load and compare. A zero byte matches no key, digit or
/// brace, so a read that succeeds never used the padding. The layout it
/// takes is a subset of [`exact_usage`]'s and gives the same totals;
/// `None` hands the object to it.
fn short_usage(obj: &[u8]) -> Option<(u64, f64)> {
    let mut buf: Padded = [0; SHORT + 32];
    let n = obj.len().min(SHORT);
    buf[..n].copy_from_slice(&obj[..n]);
    let b = &buf;
    let (input, i) = short_int(b, key(b, 0, b"{\"input\":")?)?;
    let (output, i) = short_int(b, key(b, i, b",\"output\":")?)?;
    let (cache_read, i) = short_int(b, key(b, i, b",\"cacheRead\":")?)?;
    let (cache_write, i) = short_int(b, key(b, i, b",\"cacheWrite\":")?)?;
    let (total, i) = short_int(b, key(b, i, b",\"totalTokens\":")?)?;
    let i = short_decimal(b, key(b, i, b",\"cost\":{\"input\":")?)?;
    let i = short_decimal(b, key(b, i, b",\"output\":")?)?;
    let i = short_decimal(b, key(b, i, b",\"cacheRead\":")?)?;
    let i = short_decimal(b, key(b, i, b",\"cacheWrite\":")?)?;
    let cost_at = key(b, i, b",\"total\":")?;
    let end = short_decimal(b, cost_at)?;
    key(b, end, b"}}")?;
    let total_cost = decimal_f64(obj.get(cost_at..end)?)?;
    let tokens = total_tokens(total, [input, output, cache_read, cache_write]);
    Some((tokens, total_cost))
}

/// The index after `k` when `b` holds it at `i`.
#[inline(always)]
fn key<const N: usize>(b: &Padded, i: usize, k: &[u8; N]) -> Option<usize> {
    (b.get(i..i + N)? == k).then_some(i + N)
}

/// The eight bytes at `i` as a little-endian word.
#[inline(always)]
fn word(b: &Padded, i: usize) -> Option<u64> {
    Some(u64::from_le_bytes(*b.get(i..)?.first_chunk::<8>()?))
}

/// How many digits (1 to 19) start at `i`, not a `0` followed by more
/// (JSON's integer part); `None` otherwise.
#[inline(always)]
fn short_int_part(b: &Padded, i: usize) -> Option<usize> {
    let n = short_digits(b, i)?;
    (n <= 19 && (n == 1 || b[i] != b'0')).then_some(n)
}

/// How many digits (1 to 31) start at `i`, read eight at a time; `None`
/// for none or more.
#[inline(always)]
fn short_digits(b: &Padded, i: usize) -> Option<usize> {
    let not_digit = |w: u64| {
        const HIGH: u64 = 0xF0F0_F0F0_F0F0_F0F0;
        const THREES: u64 = 0x3030_3030_3030_3030;
        const SIXES: u64 = 0x0606_0606_0606_0606;
        ((w & HIGH) ^ THREES) | ((w.wrapping_add(SIXES) & HIGH) ^ THREES)
    };
    let mut n = 0;
    while n < 32 {
        let m = not_digit(word(b, i + n)?);
        if m != 0 {
            n += (m.trailing_zeros() / 8) as usize;
            return (n > 0).then_some(n);
        }
        n += 8;
    }
    None
}

/// An integer of [`short_digits`] at `i`: its digits and the index after.
#[inline(always)]
fn short_int(b: &Padded, i: usize) -> Option<(&[u8], usize)> {
    let n = short_int_part(b, i)?;
    Some((&b[i..i + n], i + n))
}

/// A decimal at `i` (short digits, then `.` and short digits if any, no
/// sign): the index after it.
#[inline(always)]
fn short_decimal(b: &Padded, i: usize) -> Option<usize> {
    let end = i + short_int_part(b, i)?;
    if b[end] != b'.' {
        return Some(end);
    }
    Some(end + 1 + short_digits(b, end + 1)?)
}

/// [`fast_usage`] for the one layout pi writes, key for key:
/// `{"input":I,"output":I,"cacheRead":I,"cacheWrite":I,"totalTokens":I,
/// "cost":{"input":F,"output":F,"cacheRead":F,"cacheWrite":F,"total":F}}`
/// with plain integers and exponent-free decimals; one pass, no lookups:
/// each key is compared as a fixed-size array (a few loads, no call) and
/// each number is only checked; values are read only for the totals
/// (`totalTokens`, else the sum of the parts, and the total cost). `None`
/// for anything else.
fn exact_usage(obj: &[u8]) -> Option<(u64, f64)> {
    let (input, p) = int_token(after(obj, b"{\"input\":")?)?;
    let (output, p) = int_token(after(p, b",\"output\":")?)?;
    let (cache_read, p) = int_token(after(p, b",\"cacheRead\":")?)?;
    let (cache_write, p) = int_token(after(p, b",\"cacheWrite\":")?)?;
    let (total, p) = int_token(after(p, b",\"totalTokens\":")?)?;
    let p = after(p, b",\"cost\":{\"input\":")?;
    let p = &p[plain_decimal(p)?..];
    let p = after(p, b",\"output\":")?;
    let p = &p[plain_decimal(p)?..];
    let p = after(p, b",\"cacheRead\":")?;
    let p = &p[plain_decimal(p)?..];
    let p = after(p, b",\"cacheWrite\":")?;
    let p = &p[plain_decimal(p)?..];
    let p = after(p, b",\"total\":")?;
    let n = plain_decimal(p)?;
    after(&p[n..], b"}}")?;
    let total_cost = decimal_f64(&p[..n])?;
    let tokens = total_tokens(total, [input, output, cache_read, cache_write]);
    Some((tokens, total_cost))
}

/// The bytes after `key` when `p` starts with it (compared as a fixed-size
/// array: a few loads, no call).
#[inline(always)]
pub(crate) fn after<'a, const N: usize>(p: &'a [u8], key: &[u8; N]) -> Option<&'a [u8]> {
    match p.split_first_chunk::<N>() {
        Some((head, rest)) if head == key => Some(rest),
        _ => None,
    }
}

/// How many ASCII digits `b` starts with, read eight bytes at a time: a
/// byte is a digit when its high nibble is 3 and adding 6 keeps it so
/// (`0x30..=0x39`). A carry out of a non-digit byte can only disturb the
/// bytes after it, and only the first non-digit counts.
#[inline(always)]
fn digit_run(b: &[u8]) -> usize {
    const HIGH: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    const THREES: u64 = 0x3030_3030_3030_3030;
    const SIXES: u64 = 0x0606_0606_0606_0606;
    let mut n = 0;
    while let Some(chunk) = b[n..].first_chunk::<8>() {
        let w = u64::from_le_bytes(*chunk);
        let not_digit = ((w & HIGH) ^ THREES) | ((w.wrapping_add(SIXES) & HIGH) ^ THREES);
        if not_digit != 0 {
            return n + (not_digit.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n + b[n..]
        .iter()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(b.len() - n)
}

/// A JSON integer without sign (`0` or no leading zero, at most 19 digits,
/// not followed by a fraction or exponent): its digits and the bytes
/// after it.
#[inline(always)]
fn int_token(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let n = digit_run(b);
    if n == 0 || n > 19 || (n > 1 && b[0] == b'0') {
        return None;
    }
    if matches!(b.get(n), Some(b'.' | b'e' | b'E')) {
        return None;
    }
    Some(b.split_at(n))
}

/// A usage's token count as pi totals it: `totalTokens` when it is not
/// zero, else the sum of the four parts (each given as its digits).
fn total_tokens(total: &[u8], parts: [&[u8]; 4]) -> u64 {
    match int_value(total) {
        0 => parts.iter().map(|t| int_value(t)).sum(),
        n => n,
    }
}

/// The value of an [`int_token`] (at most 19 digits: no overflow).
#[inline(always)]
fn int_value(digits: &[u8]) -> u64 {
    digits
        .iter()
        .fold(0u64, |v, d| v * 10 + u64::from(d - b'0'))
}

/// The value of a [`plain_decimal`] token, as `str::parse::<f64>` gives
/// it. A token whose digits make a mantissa of at most 2^53 is
/// `mantissa / 10^fraction digits` with both operands exact in an `f64`
/// (power <= 10^22), so the one division is correctly rounded, which is
/// what `parse` returns; other tokens go through `parse`.
fn decimal_f64(tok: &[u8]) -> Option<f64> {
    const POW10: [f64; 23] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ];
    let (neg, digits) = match tok.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, tok),
    };
    let frac = digits
        .iter()
        .position(|&c| c == b'.')
        .map_or(0, |dot| digits.len() - dot - 1);
    let slow = || std::str::from_utf8(tok).ok()?.parse().ok();
    let (mut mantissa, mut count) = (0u64, 0);
    for &c in digits {
        if c.is_ascii_digit() {
            if count == 19 {
                return slow();
            }
            mantissa = mantissa * 10 + u64::from(c - b'0');
            count += 1;
        } else if c != b'.' {
            return slow();
        }
    }
    if count == 0
        || mantissa > 1 << 53
        || frac >= POW10.len()
        || digits.len() != count + usize::from(frac > 0)
    {
        return slow();
    }
    let v = mantissa as f64 / POW10[frac];
    Some(if neg { -v } else { v })
}

/// The length of a JSON number without exponent (`-`, `0` or no leading
/// zero, an optional fraction with digits): always finite.
#[inline(always)]
fn plain_decimal(b: &[u8]) -> Option<usize> {
    let neg = usize::from(b.first() == Some(&b'-'));
    let int = digit_run(&b[neg..]);
    if int == 0 || int > 300 || (int > 1 && b[neg] == b'0') {
        return None;
    }
    let mut n = neg + int;
    if b.get(n) == Some(&b'.') {
        let frac = digit_run(&b[n + 1..]);
        if frac == 0 {
            return None;
        }
        n += 1 + frac;
    }
    if matches!(b.get(n), Some(b'e' | b'E')) {
        return None;
    }
    Some(n)
}

/// Tokens and cost of a usage object written as pi writes it:
/// `{"input":N,…,"totalTokens":N,"cost":{…,"total":F}}` with number values
/// only (any key order, unknown number keys ignored). `None` for anything
/// else (strings, nesting, duplicates, bad numbers): the caller falls back
/// to serde, so this is only ever a faster route to the same totals as
/// [`Usage`] gives.
fn fast_usage(obj: &[u8]) -> Option<(u64, f64)> {
    const TOKEN_KEYS: [&[u8]; 5] = [
        b"input",
        b"output",
        b"cacheRead",
        b"cacheWrite",
        b"totalTokens",
    ];
    let mut tokens: [Option<u64>; 5] = [None; 5];
    let mut cost_total: Option<f64> = None;
    let mut seen_cost = false;
    let mut p = Cursor { b: obj, i: 0 };
    p.eat(b'{')?;
    if p.peek()? == b'}' {
        return Some((0, 0.0));
    }
    loop {
        let key = p.key()?;
        if key == b"cost" {
            if std::mem::replace(&mut seen_cost, true) {
                return None;
            }
            p.eat(b'{')?;
            if p.peek()? != b'}' {
                loop {
                    let k = p.key()?;
                    let n = p.number()?;
                    if k == b"total" {
                        if cost_total.is_some() {
                            return None;
                        }
                        cost_total = Some(n.as_f64());
                    }
                    if !p.next_or_end()? {
                        break;
                    }
                }
            } else {
                p.i += 1;
            }
        } else {
            let n = p.number()?;
            if let Some(k) = TOKEN_KEYS.iter().position(|t| *t == key) {
                if tokens[k].replace(n.as_u64()).is_some() {
                    return None;
                }
            }
        }
        if !p.next_or_end()? {
            break;
        }
    }
    let [input, output, cache_read, cache_write, total] = tokens.map(|t| t.unwrap_or(0));
    let tokens = if total > 0 {
        total
    } else {
        input + output + cache_read + cache_write
    };
    Some((tokens, cost_total.unwrap_or(0.0)))
}

/// A JSON number token (checked against JSON's grammar, finite), converted
/// as [`crate::format::Num`] does.
struct NumTok<'a>(&'a [u8]);

impl NumTok<'_> {
    fn is_integer(&self) -> bool {
        self.0.iter().all(u8::is_ascii_digit)
    }

    fn as_f64(&self) -> f64 {
        std::str::from_utf8(self.0)
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or(0.0)
    }

    fn as_u64(&self) -> u64 {
        if self.is_integer() && self.0.len() <= 19 {
            return self
                .0
                .iter()
                .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        }
        let f = self.as_f64();
        if f.is_finite() && f > 0.0 {
            f as u64
        } else {
            0
        }
    }
}

/// A tiny reader for [`fast_usage`]: no whitespace (pi writes none; any
/// makes it give up), keys without escapes, plain numbers.
struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// `"key":` → `key`.
    fn key(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let rest = &self.b[self.i..];
        // Keys are a few letters: a plain loop beats a vectorised search.
        let end = rest.iter().position(|&c| c == b'"' || c == b'\\')?;
        if rest[end] != b'"' {
            return None;
        }
        self.i += end + 1;
        self.eat(b':')?;
        Some(&rest[..end])
    }

    /// A number that JSON allows (and serde reads: finite), as its text.
    fn number(&mut self) -> Option<NumTok<'a>> {
        let rest = &self.b[self.i..];
        let end = rest
            .iter()
            .position(|c| !(c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E')))?;
        let text = &rest[..end];
        self.i += end;
        let tok = NumTok(text);
        let digits = text.strip_prefix(b"-").unwrap_or(text);
        let int_len = digits
            .iter()
            .position(|c| !c.is_ascii_digit())
            .unwrap_or(digits.len());
        let (int, tail) = digits.split_at(int_len);
        if int.is_empty() || (int.len() > 1 && int[0] == b'0') {
            return None;
        }
        if tail.is_empty() && int.len() <= 19 {
            return Some(tok);
        }
        // Fractions and exponents: JSON's grammar (Rust's parser is laxer:
        // "1.", "1e"), and a finite value (serde refuses "1e400").
        let mut t = tail;
        if let Some(frac) = t.strip_prefix(b".") {
            let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
            if n == 0 {
                return None;
            }
            t = &frac[n..];
        }
        let mut huge = int.len() > 300;
        if let Some(exp) = t.strip_prefix(b"e").or_else(|| t.strip_prefix(b"E")) {
            let exp = exp
                .strip_prefix(b"+")
                .or_else(|| exp.strip_prefix(b"-"))
                .unwrap_or(exp);
            if exp.is_empty() || !exp.iter().all(u8::is_ascii_digit) {
                return None;
            }
            t = &[];
            huge = true;
        }
        if !t.is_empty() || (huge && !tok.as_f64().is_finite()) {
            return None;
        }
        Some(tok)
    }

    /// After a value: `,` → true (more), `}` → false (end of object).
    fn next_or_end(&mut self) -> Option<bool> {
        match self.peek()? {
            b',' => {
                self.i += 1;
                Some(true)
            }
            b'}' => {
                self.i += 1;
                Some(false)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_f64_is_what_parse_gives() {
        let mut toks: Vec<String> = [
            "0",
            "-0",
            "0.0",
            "-0.0",
            "1",
            "10",
            "0.03027025",
            "0.01216875",
            "0.0001515",
            "123456789012345",
            "1234567890123456",
            "0.1234567890123456789",
            "-2.5",
            "999999999999999",
            "0.000000000000000000001",
            "0.0000000000000000000001",
            "0.00000000000000000000001",
            "17.000000000000001",
            "3.14159",
            "9007199254740992",
            "9007199254740993",
            "0.9007199254740993",
            "900719925474.0991",
            "1844674407370955161",
            "0.000000000000000000009007199254740991",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Pseudo-random costs with 1-19 significant digits.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = 1 + (x % 19) as usize;
            let m = (x >> 4) % 10u64.pow(digits as u32);
            let frac = ((x >> 40) % 23) as usize;
            let s = format!("{m:0>width$}", width = frac + 1);
            let (i, f) = s.split_at(s.len() - frac);
            toks.push(if frac == 0 {
                i.to_string()
            } else {
                format!("{i}.{f}")
            });
        }
        for t in &toks {
            assert_eq!(
                plain_decimal(t.as_bytes()).map(|n| n == t.len()),
                Some(true),
                "{t}"
            );
            let want: f64 = t.parse().unwrap();
            let got = decimal_f64(t.as_bytes()).unwrap();
            assert_eq!(got.to_bits(), want.to_bits(), "{t}");
        }
    }

    #[test]
    fn digit_runs_are_counted_as_a_byte_loop_counts_them() {
        let naive = |b: &[u8]| b.iter().take_while(|c| c.is_ascii_digit()).count();
        let mut cases: Vec<Vec<u8>> = vec![b"".to_vec(), b"0".to_vec(), b"1234567".to_vec()];
        // Every byte value at every place of runs around the 8-byte step.
        for len in 0..20 {
            for at in 0..=len {
                for c in 0..=255u8 {
                    let mut v: Vec<u8> = (0..len).map(|i| b'0' + (i % 10) as u8).collect();
                    if at < len {
                        v[at] = c;
                    }
                    v.extend_from_slice(b"\xff\xfa9");
                    cases.push(v);
                }
            }
        }
        for c in &cases {
            assert_eq!(digit_run(c), naive(c), "{c:?}");
        }
    }

    #[test]
    fn the_short_reader_is_the_exact_one_or_steps_aside() {
        let mut objs: Vec<String> = Vec::new();
        // The short reader's numbers first, then others.
        let nums = [
            "0",
            "7",
            "10",
            "123456789012345",
            "00",
            "01",
            "1234567890123456",
            "-1",
            "1.5",
            "1e3",
        ];
        let decs = [
            "0",
            "0.0",
            "0.00061075",
            "12.5",
            "0.123456789012345",
            "123456789012345.123456789012345",
            "3",
            "0.024222599999999997",
            "0.1234567890123456",
            "01.5",
            "1.",
            ".5",
            "-0.5",
            "1e-7",
            "1.0E2",
        ];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..4000 {
            let mut pick = |n: usize| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % n as u64) as usize
            };
            let odd = pick(2) == 0;
            let mut num = |list: &[&'static str], usual: usize| {
                let n = if odd { list.len() } else { usual };
                list[pick(n)]
            };
            let i: Vec<&str> = (0..5).map(|_| num(&nums, 4)).collect();
            let d: Vec<&str> = (0..5).map(|_| num(&decs, 7)).collect();
            let mut o = format!(
                r#"{{"input":{},"output":{},"cacheRead":{},"cacheWrite":{},"totalTokens":{},"cost":{{"input":{},"output":{},"cacheRead":{},"cacheWrite":{},"total":{}}}}}"#,
                i[0], i[1], i[2], i[3], i[4], d[0], d[1], d[2], d[3], d[4]
            );
            // Cut, padded past the copied bytes, or followed by the rest of a line.
            match pick(4) {
                0 => o.truncate(pick(o.len() + 1)),
                1 => {
                    o = o.replacen(
                        "{\"input\"",
                        &format!("{{\"input\"{}", " ".repeat(pick(300))),
                        1,
                    )
                }
                2 => o.push_str(r#","stopReason":"stop","timestamp":1}}"#),
                _ => {}
            }
            objs.push(o);
        }
        let mut short = 0;
        for o in &objs {
            if let Some(t) = short_usage(o.as_bytes()) {
                assert_eq!(Some(t), exact_usage(o.as_bytes()), "{o}");
                short += 1;
            }
        }
        assert!(short > 100, "{short} read by the short reader");
    }

    #[test]
    fn usage_is_found_as_a_reverse_search_finds_it() {
        let finder = memmem::FinderRev::new(USAGE_KEY);
        let mut cases: Vec<String> = vec![
            r#"{"usage":{"input":1},"stopReason":"stop","timestamp":1}}"#.into(),
            r#"no key at all, no letter"#.into(),
            r#"{"a":"usage","usage":{}}"#.into(),
            r#""usage":{"#.into(),
            r#"sage":{"#.into(),
        ];
        let gs = "g".repeat(20);
        cases.push(format!(
            r#"{{"usage":{{"input":1}},"errorMessage":"{gs}"}}"#
        ));
        cases.push(format!(
            r#"{{"usage":{{"x":1}},"e":"a{gs}b","usage":{{"y":2}},"f":"{gs}"}}"#
        ));
        for c in &cases {
            assert_eq!(
                rfind_usage(c.as_bytes(), &finder),
                finder.rfind(c.as_bytes()),
                "{c}"
            );
        }
    }

    #[test]
    fn the_fast_usage_reader_agrees_with_serde_or_steps_aside() {
        let cases = [
            r#"{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":15,"cost":{"input":0.1,"output":0.2,"cacheRead":0,"cacheWrite":0,"total":0.3}}"#,
            r#"{"input":10,"output":5,"cacheRead":3,"cacheWrite":2,"totalTokens":0,"cost":{"total":1e-7}}"#,
            r#"{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":-0.5,"cacheRead":0.0,"cacheWrite":0,"total":0.021888499999999998}}"#,
            r#"{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":1e-7}}"#,
            r#"{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3.5,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":1}}"#,
            r#"{"input":01,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":1}}"#,
            r#"{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":1.}}"#,
            r#"{"totalTokens":12.9,"reasoning":4,"cost":{"total":-1}}"#,
            r#"{"input":-5,"output":18446744073709551615,"cost":{}}"#,
            r#"{}"#,
            r#"{"cost":{"total":2},"input":1,"output":1}"#,
            r#"{"input":1e400}"#,
            r#"{"input":01}"#,
            r#"{"input":1.}"#,
            r#"{"input":"7"}"#,
            r#"{"input":1,"input":2}"#,
            r#"{"input": 1}"#,
            r#"{"cost":{"total":1,"total":2}}"#,
            r#"{"input":1,"extra":{"a":1}}"#,
            r#"{"in"put":1}"#,
            r#"{"input":1"#,
        ];
        for c in cases {
            let serde = serde_json::Deserializer::from_slice(c.as_bytes())
                .into_iter::<Usage>()
                .next()
                .and_then(Result::ok)
                .map(|u| usage_totals(&u));
            // `None`: serde decides.
            if let Some(fast) = fast_usage(c.as_bytes()) {
                assert_eq!(Some(fast), serde, "{c}");
            }
            if let Some(exact) = exact_usage(c.as_bytes()) {
                assert_eq!(Some(exact), serde, "{c}");
            }
            if let Some(short) = short_usage(c.as_bytes()) {
                assert_eq!(Some(short), serde, "{c}");
            }
        }
        assert_eq!(fast_usage(cases[0].as_bytes()), Some((15, 0.3)));
        assert_eq!(short_usage(cases[0].as_bytes()), Some((15, 0.3)));
        assert_eq!(exact_usage(cases[0].as_bytes()), Some((15, 0.3)));
        assert_eq!(exact_usage(cases[1].as_bytes()), None, "not pi's layout");
        assert_eq!(fast_usage(cases[1].as_bytes()), Some((20, 1e-7)));
        assert_eq!(fast_usage(cases[11].as_bytes()), None);
        assert_eq!(
            exact_usage(cases[2].as_bytes()),
            Some((0, 0.021888499999999998))
        );
    }
}
