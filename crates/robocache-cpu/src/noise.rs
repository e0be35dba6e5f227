//! Deterministic noise for tests, benchmarks and the CLI's workloads: one
//! xorshift64 generator (Marsaglia's 13/7/17 shifts), so that every run of
//! every harness feeds the same inputs from the same seed.
//!
//! ```
//! use robocache_cpu::noise::{self, XorShift};
//!
//! let mut rng = XorShift::new(7);
//! let (a, b) = (rng.next_u64(), rng.next_u64());
//! assert_ne!(a, b);
//! assert_eq!(noise::bytes(3, 16), noise::bytes(3, 16));
//! assert!(noise::signed_units(1, 100).iter().all(|v| (-1.0..1.0).contains(v)));
//! ```

/// A xorshift64 generator. Not for cryptography, nor for statistics beyond
/// "inputs that look random": fast, seeded and the same everywhere.
#[derive(Clone, Debug)]
pub struct XorShift {
    state: u64,
}

impl XorShift {
    /// A generator from `seed` (any value; xorshift's state must not be zero).
    pub fn new(seed: u64) -> Self {
        XorShift { state: seed | 1 }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    /// A byte (the top 8 bits).
    pub fn next_byte(&mut self) -> u8 {
        (self.next_u64() >> 56) as u8
    }

    /// A value in [-1, 1) on a grid of 2^-23 (the top 24 bits).
    pub fn next_signed_unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// A value in [0, 1) on a grid of 2^-53 (the top 53 bits).
    pub fn next_unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `len` bytes of noise from `seed`.
pub fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = XorShift::new(seed);
    (0..len).map(|_| rng.next_byte()).collect()
}

/// `len` values in [-1, 1) from `seed` (spread first, so that nearby seeds
/// give unrelated streams).
pub fn signed_units(seed: u64, len: usize) -> Vec<f32> {
    let mut rng = XorShift::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    (0..len).map(|_| rng.next_signed_unit()).collect()
}
