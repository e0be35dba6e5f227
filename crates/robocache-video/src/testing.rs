//! Hostile bytes for the parsers' fuzz harnesses (the `testing` feature):
//! proptest strategies of mutations applied to a committed fixture, the
//! kinds of damage a crafted or broken file holds (bit flips, bytes set,
//! 32-bit and 64-bit fields set to extremes, truncation, insertion,
//! deletion, and for text the numbers and strings a JSON field may hold).
//! proptest runs them, shrinks what fails and records it in the crate's
//! `proptest-regressions/`, so every crash found is kept as a regression
//! case. A parse that does not answer within [`DEADLINE`] is a failure.

use std::time::Duration;

use proptest::prelude::*;

/// The longest one parse of one mutated file may take.
pub const DEADLINE: Duration = Duration::from_secs(5);

/// Field values that break arithmetic that is not checked.
const EXTREMES_32: [u32; 8] = [0, 1, 7, 8, 0x7fff_ffff, 0x8000_0000, 0xffff_fff0, 0xffff_ffff];
const EXTREMES_64: [u64; 6] = [0, 1, 1 << 32, 0x7fff_ffff_ffff_ffff, 0xffff_ffff_ffff_ffe0, u64::MAX];
/// Replacements for a number in a text file.
const NUMBERS: [&str; 10] =
    ["-1", "0", "-0", "1e308", "18446744073709551616", "-9223372036854775809", "4294967295", "0.0", "3.5", "1e-320"];
/// Replacements for a string in a text file.
const STRINGS: [&str; 9] = [
    "../../outside/x",
    "/etc/passwd",
    "s3://elsewhere/x",
    "{chunk_index:0999999999d}",
    "{unknown}",
    "{",
    "",
    "v9.9",
    "a\\u0000b",
];

/// One change to a file's bytes; positions are taken modulo the length.
#[derive(Clone, Debug)]
pub enum Mutation {
    FlipBit {
        at: usize,
        bit: u8,
    },
    SetByte {
        at: usize,
        value: u8,
    },
    SetU32 {
        at: usize,
        value: u32,
    },
    SetU64 {
        at: usize,
        value: u64,
    },
    /// [`Mutation::SetU32`] little-endian (MCAP records, CDR, parquet, SQLite's header sizes are not).
    SetU32Le {
        at: usize,
        value: u32,
    },
    /// [`Mutation::SetU64`] little-endian (MCAP lengths and offsets, CDR doubles).
    SetU64Le {
        at: usize,
        value: u64,
    },
    Truncate {
        keep_per_mille: u16,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    Delete {
        at: usize,
        len: usize,
    },
    /// The `nth` run of ASCII digits (with its sign) becomes a number of [`NUMBERS`].
    Number {
        nth: usize,
        replacement: usize,
    },
    /// The `nth` string between double quotes becomes a string of [`STRINGS`].
    String {
        nth: usize,
        replacement: usize,
    },
}

/// Any mutation.
pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::FlipBit { at, bit }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, value)| Mutation::SetByte { at, value }),
        (any::<usize>(), prop::sample::select(&EXTREMES_32[..])).prop_map(|(at, value)| Mutation::SetU32 { at, value }),
        (any::<usize>(), prop::sample::select(&EXTREMES_64[..])).prop_map(|(at, value)| Mutation::SetU64 { at, value }),
        (any::<usize>(), prop::sample::select(&EXTREMES_32[..]))
            .prop_map(|(at, value)| Mutation::SetU32Le { at, value }),
        (any::<usize>(), prop::sample::select(&EXTREMES_64[..]))
            .prop_map(|(at, value)| Mutation::SetU64Le { at, value }),
        (0u16..1000).prop_map(|keep_per_mille| Mutation::Truncate { keep_per_mille }),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (any::<usize>(), 1usize..64).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (any::<usize>(), 0..NUMBERS.len()).prop_map(|(nth, replacement)| Mutation::Number { nth, replacement }),
        (any::<usize>(), 0..STRINGS.len()).prop_map(|(nth, replacement)| Mutation::String { nth, replacement }),
    ]
}

/// One to `most` mutations.
pub fn mutations(most: usize) -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(mutation(), 1..=most.max(1))
}

/// Applies `mutations` to `bytes` in order.
pub fn apply(bytes: &mut Vec<u8>, mutations: &[Mutation]) {
    for mutation in mutations {
        apply_one(bytes, mutation);
    }
}

fn apply_one(bytes: &mut Vec<u8>, mutation: &Mutation) {
    let len = bytes.len();
    let at = |at: usize| if len == 0 { 0 } else { at % len };
    match mutation {
        Mutation::FlipBit { at: i, bit } if len > 0 => bytes[at(*i)] ^= 1 << bit,
        Mutation::SetByte { at: i, value } if len > 0 => bytes[at(*i)] = *value,
        Mutation::SetU32 { at: i, value } if len >= 4 => {
            let i = at(*i).min(len - 4);
            bytes[i..i + 4].copy_from_slice(&value.to_be_bytes());
        }
        Mutation::SetU64 { at: i, value } if len >= 8 => {
            let i = at(*i).min(len - 8);
            bytes[i..i + 8].copy_from_slice(&value.to_be_bytes());
        }
        Mutation::SetU32Le { at: i, value } if len >= 4 => {
            let i = at(*i).min(len - 4);
            bytes[i..i + 4].copy_from_slice(&value.to_le_bytes());
        }
        Mutation::SetU64Le { at: i, value } if len >= 8 => {
            let i = at(*i).min(len - 8);
            bytes[i..i + 8].copy_from_slice(&value.to_le_bytes());
        }
        Mutation::Truncate { keep_per_mille } => bytes.truncate(len * *keep_per_mille as usize / 1000),
        Mutation::Insert { at: i, bytes: inserted } => {
            let i = at(*i);
            bytes.splice(i..i, inserted.iter().copied());
        }
        Mutation::Delete { at: i, len: n } if len > 0 => {
            let i = at(*i);
            bytes.drain(i..(i + n).min(len));
        }
        Mutation::Number { nth, replacement } => {
            let runs = runs(bytes, |b| b.is_ascii_digit() || b == b'-' || b == b'.');
            if !runs.is_empty() {
                let (start, end) = runs[nth % runs.len()];
                bytes.splice(start..end, NUMBERS[*replacement].bytes());
            }
        }
        Mutation::String { nth, replacement } => {
            let quotes: Vec<usize> = bytes.iter().enumerate().filter(|(_, b)| **b == b'"').map(|(i, _)| i).collect();
            let pairs: Vec<(usize, usize)> = quotes.chunks_exact(2).map(|q| (q[0] + 1, q[1])).collect();
            if !pairs.is_empty() {
                let (start, end) = pairs[nth % pairs.len()];
                bytes.splice(start..end, STRINGS[*replacement].bytes());
            }
        }
        _ => {}
    }
}

/// The `[start, end)` runs of bytes that `inside` accepts.
fn runs(bytes: &[u8], inside: impl Fn(u8) -> bool) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, &b) in bytes.iter().chain(std::iter::once(&b' ')).enumerate() {
        match (inside(b) && i < bytes.len(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// Runs `work` on a thread and waits at most [`DEADLINE`] for it: a hang
/// is a panic naming `what`. (A hung thread is left behind; the test fails.)
pub fn within_deadline<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    within(DEADLINE, what, work)
}

/// [`within_deadline`] with a deadline of `deadline`; a worker that
/// panics fails the caller too, naming `what`.
pub fn within<T: Send + 'static>(deadline: Duration, what: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(work());
    });
    match receive.recv_timeout(deadline) {
        Ok(value) => value,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no answer within {deadline:?} (a hang)"),
        // The worker panicked: proptest reports the panic of this thread instead.
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: it panicked"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_change_bytes_where_they_say() {
        let mut bytes = b"{\"fps\": 30, \"path\": \"data/x\"}".to_vec();
        apply(&mut bytes, &[Mutation::Number { nth: 0, replacement: 0 }]);
        assert_eq!(bytes, b"{\"fps\": -1, \"path\": \"data/x\"}");
        apply(&mut bytes, &[Mutation::String { nth: 2, replacement: 0 }]);
        assert_eq!(bytes, b"{\"fps\": -1, \"path\": \"../../outside/x\"}");
        let mut bytes = vec![0u8; 10];
        apply(
            &mut bytes,
            &[Mutation::SetU32 { at: 9, value: 0xffff_ffff }, Mutation::Truncate { keep_per_mille: 500 }],
        );
        assert_eq!(bytes, [0, 0, 0, 0, 0]);
        let mut empty = Vec::new();
        apply(&mut empty, &[Mutation::FlipBit { at: 3, bit: 1 }, Mutation::Delete { at: 0, len: 4 }]);
        assert!(empty.is_empty());
    }
}
