//! Element types: the [`DType`] tag, the [`Element`] trait every supported
//! scalar implements, and the type-erased [`HostSlice`] / [`HostVec`].

use std::fmt;

use half::{bf16, f16};

/// The element type of an array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    Bool,
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
    F16,
    BF16,
    F32,
    F64,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 13] = [
        DType::Bool,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// Size of one element in bytes.
    pub const fn size_in_bytes(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 => 8,
        }
    }

    /// True for the floating-point dtypes (f16, bf16, f32, f64).
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// The dtype called `name` ([`DType::name`]: `f32`, `bf16`, `bool`, ...).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The name used in errors, the CLI and NumPy (`bf16` has no NumPy name).
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A scalar type robocache operates on.
///
/// Sealed: the set of element types is closed so that every backend can
/// support all of them.
pub trait Element:
    sealed::Sealed + Copy + Send + Sync + PartialEq + fmt::Debug + bytemuck::NoUninit + bytemuck::Zeroable + 'static
{
    /// The dtype tag of this type.
    const DTYPE: DType;

    /// The value as `f64`: exact for every type except 64-bit integers above 2^53,
    /// which round to nearest.
    fn to_f64(self) -> f64;

    /// `v` as this type if it is representable: rounded to nearest-even for the
    /// float types (any `f64`, including non-finite ones); exactly for the
    /// integer types and bool (an integral value in range, else `None`).
    fn from_f64_exact(v: f64) -> Option<Self>;

    /// `v` rounded to nearest-even into this type (`None` for integer types
    /// and bool, where no rounding conversion is defined).
    fn from_f64_rounded(v: f64) -> Option<Self>;

    /// Linear interpolation `x0 + w·(x1 − x0)` in this type's compute
    /// precision (f32 for f16/bf16/f32, f64 for f64), rounded to nearest-even;
    /// `None` for integer types and bool.
    fn lerp(x0: Self, x1: Self, w: f64) -> Option<Self>;

    /// [`Element::lerp`] over slices, `out[i] = lerp(x0[i], x1[i], w)`, in a
    /// loop the compiler can vectorize; `None` (and `out` untouched) for
    /// integer types and bool.
    fn lerp_slice(out: &mut [Self], x0: &[Self], x1: &[Self], w: f64) -> Option<()>;

    /// Wraps a slice of this type as a [`HostSlice`].
    fn slice(data: &[Self]) -> HostSlice<'_>;

    /// Wraps a vector of this type as a [`HostVec`].
    fn vec(data: Vec<Self>) -> HostVec;

    /// The slice inside `data` if it has this type.
    fn from_host_slice<'a>(data: &HostSlice<'a>) -> Option<&'a [Self]>;

    /// The vector inside `data` if it has this type.
    fn from_host_vec(data: HostVec) -> Result<Vec<Self>, HostVec>;
}

/// Linear interpolation in f32: `x0 + w·(x1 − x0)`, every operation rounded
/// separately (no fused multiply-add), so every backend gets the same bits.
#[inline]
fn lerp_f32(x0: f32, x1: f32, w: f64) -> f32 {
    let w = w as f32;
    x0 + w * (x1 - x0)
}

/// The [`Element`] methods that wrap and unwrap [`HostSlice`] / [`HostVec`].
macro_rules! host_containers {
    ($dtype:ident) => {
        fn slice(data: &[Self]) -> HostSlice<'_> {
            HostSlice::$dtype(data)
        }
        fn vec(data: Vec<Self>) -> HostVec {
            HostVec::$dtype(data)
        }
        fn from_host_slice<'a>(data: &HostSlice<'a>) -> Option<&'a [Self]> {
            match data {
                HostSlice::$dtype(v) => Some(v),
                _ => None,
            }
        }
        fn from_host_vec(data: HostVec) -> Result<Vec<Self>, HostVec> {
            match data {
                HostVec::$dtype(v) => Ok(v),
                other => Err(other),
            }
        }
    };
}

macro_rules! integer_element {
    ($ty:ty, $dtype:ident) => {
        impl sealed::Sealed for $ty {}
        impl Element for $ty {
            const DTYPE: DType = DType::$dtype;
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64_exact(v: f64) -> Option<Self> {
                // The range check is done in f64 and is exact for the bounds
                // that matter: `MIN` is a power of two (or 0) and `MAX + 1` is one.
                let lowest = <$ty>::MIN as f64;
                let above = (<$ty>::MAX as f64) + 1.0;
                (v.fract() == 0.0 && v >= lowest && v < above).then_some(v as $ty)
            }
            fn from_f64_rounded(_: f64) -> Option<Self> {
                None
            }
            #[inline]
            fn lerp(_: Self, _: Self, _: f64) -> Option<Self> {
                None
            }
            fn lerp_slice(_: &mut [Self], _: &[Self], _: &[Self], _: f64) -> Option<()> {
                None
            }
            host_containers!($dtype);
        }
    };
}

integer_element!(u8, U8);
integer_element!(u16, U16);
integer_element!(u32, U32);
integer_element!(u64, U64);
integer_element!(i8, I8);
integer_element!(i16, I16);
integer_element!(i32, I32);
integer_element!(i64, I64);

macro_rules! float_element {
    ($ty:ty, $dtype:ident, to_f64: $to:expr, from_f64: $from:expr, from_f32: $from32:expr, to_f32: $to32:expr) => {
        impl sealed::Sealed for $ty {}
        impl Element for $ty {
            const DTYPE: DType = DType::$dtype;
            #[inline]
            fn to_f64(self) -> f64 {
                $to(self)
            }
            fn from_f64_exact(v: f64) -> Option<Self> {
                Some($from(v))
            }
            #[inline]
            fn from_f64_rounded(v: f64) -> Option<Self> {
                Some($from(v))
            }
            #[inline]
            fn lerp(x0: Self, x1: Self, w: f64) -> Option<Self> {
                Some($from32(lerp_f32($to32(x0), $to32(x1), w)))
            }
            #[inline]
            fn lerp_slice(out: &mut [Self], x0: &[Self], x1: &[Self], w: f64) -> Option<()> {
                let w = w as f32;
                for ((o, &a), &b) in out.iter_mut().zip(x0).zip(x1) {
                    let a = $to32(a);
                    *o = $from32(a + w * ($to32(b) - a));
                }
                Some(())
            }
            host_containers!($dtype);
        }
    };
}

float_element!(f16, F16, to_f64: f16::to_f64, from_f64: f16_from_f64,
    from_f32: f16::from_f32, to_f32: f16::to_f32);
float_element!(bf16, BF16, to_f64: bf16::to_f64, from_f64: bf16_from_f64,
    from_f32: bf16::from_f32, to_f32: bf16::to_f32);

/// `x` rounded to f32 "to odd": truncated toward zero, with the last bit set
/// when that lost anything. Rounding this to a format of at most 22 bits of
/// precision (f16: 11, bf16: 8) to nearest-even equals rounding `x` there
/// directly, which one rounding through f32 does not guarantee.
fn f32_round_to_odd(x: f64) -> f32 {
    let nearest = x as f32;
    if !nearest.is_finite() || nearest as f64 == x {
        return nearest;
    }
    // Toward zero: step back when rounding went away from zero.
    let toward_zero = if (nearest as f64).abs() > x.abs() { f32::from_bits(nearest.to_bits() - 1) } else { nearest };
    f32::from_bits(toward_zero.to_bits() | 1)
}

/// `x` rounded to nearest-even into f16, correctly (as CUDA's `__double2half`;
/// `half`'s `f16::from_f64` rounds twice on some CPUs).
pub fn f16_from_f64(x: f64) -> f16 {
    f16::from_f32(f32_round_to_odd(x))
}

/// `x` rounded to nearest-even into bf16, correctly (as CUDA's `__double2bfloat16`).
pub fn bf16_from_f64(x: f64) -> bf16 {
    bf16::from_f32(f32_round_to_odd(x))
}
float_element!(f32, F32, to_f64: (|x: f32| x as f64), from_f64: (|x: f64| x as f32),
    from_f32: (|x: f32| x), to_f32: (|x: f32| x));

impl sealed::Sealed for f64 {}
impl Element for f64 {
    const DTYPE: DType = DType::F64;
    #[inline]
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64_exact(v: f64) -> Option<Self> {
        Some(v)
    }
    fn from_f64_rounded(v: f64) -> Option<Self> {
        Some(v)
    }
    #[inline]
    fn lerp(x0: Self, x1: Self, w: f64) -> Option<Self> {
        Some(x0 + w * (x1 - x0))
    }
    #[inline]
    fn lerp_slice(out: &mut [Self], x0: &[Self], x1: &[Self], w: f64) -> Option<()> {
        for ((o, &a), &b) in out.iter_mut().zip(x0).zip(x1) {
            *o = a + w * (b - a);
        }
        Some(())
    }
    host_containers!(F64);
}

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
    #[inline]
    fn to_f64(self) -> f64 {
        if self {
            1.0
        } else {
            0.0
        }
    }
    fn from_f64_exact(v: f64) -> Option<Self> {
        if v == 0.0 {
            Some(false)
        } else if v == 1.0 {
            Some(true)
        } else {
            None
        }
    }
    fn from_f64_rounded(_: f64) -> Option<Self> {
        None
    }
    fn lerp(_: Self, _: Self, _: f64) -> Option<Self> {
        None
    }
    fn lerp_slice(_: &mut [Self], _: &[Self], _: &[Self], _: f64) -> Option<()> {
        None
    }
    host_containers!(Bool);
}

/// A borrowed slice of any [`Element`] type.
#[derive(Clone, Copy, Debug)]
pub enum HostSlice<'a> {
    Bool(&'a [bool]),
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
    U64(&'a [u64]),
    I8(&'a [i8]),
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    F16(&'a [f16]),
    BF16(&'a [bf16]),
    F32(&'a [f32]),
    F64(&'a [f64]),
}

/// An owned vector of any [`Element`] type.
#[derive(Clone, Debug, PartialEq)]
pub enum HostVec {
    Bool(Vec<bool>),
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// Runs `$body` with `$v` bound to the typed slice or vector inside a
/// [`HostSlice`] / [`HostVec`] and `$t` to its element type.
#[macro_export]
macro_rules! with_host_data {
    ($kind:ident, $value:expr, |$v:ident: $t:ident| $body:expr) => {{
        use $crate::$kind as K;
        match $value {
            K::Bool($v) => {
                #[allow(dead_code)]
                type $t = bool;
                $body
            }
            K::U8($v) => {
                #[allow(dead_code)]
                type $t = u8;
                $body
            }
            K::U16($v) => {
                #[allow(dead_code)]
                type $t = u16;
                $body
            }
            K::U32($v) => {
                #[allow(dead_code)]
                type $t = u32;
                $body
            }
            K::U64($v) => {
                #[allow(dead_code)]
                type $t = u64;
                $body
            }
            K::I8($v) => {
                #[allow(dead_code)]
                type $t = i8;
                $body
            }
            K::I16($v) => {
                #[allow(dead_code)]
                type $t = i16;
                $body
            }
            K::I32($v) => {
                #[allow(dead_code)]
                type $t = i32;
                $body
            }
            K::I64($v) => {
                #[allow(dead_code)]
                type $t = i64;
                $body
            }
            K::F16($v) => {
                #[allow(dead_code)]
                type $t = $crate::half::f16;
                $body
            }
            K::BF16($v) => {
                #[allow(dead_code)]
                type $t = $crate::half::bf16;
                $body
            }
            K::F32($v) => {
                #[allow(dead_code)]
                type $t = f32;
                $body
            }
            K::F64($v) => {
                #[allow(dead_code)]
                type $t = f64;
                $body
            }
        }
    }};
}

impl<'a> HostSlice<'a> {
    /// `len` elements of `dtype` at `data`, borrowed.
    ///
    /// # Safety
    ///
    /// `data` must be aligned to the element size and point to `len`
    /// initialised elements of `dtype` (for bool, bytes that are 0 or 1)
    /// that stay valid and unwritten for `'a`.
    pub unsafe fn from_raw_parts(dtype: DType, data: *const u8, len: usize) -> HostSlice<'a> {
        // SAFETY (every arm): forwarded to the caller.
        unsafe {
            match dtype {
                DType::Bool => HostSlice::Bool(std::slice::from_raw_parts(data.cast(), len)),
                DType::U8 => HostSlice::U8(std::slice::from_raw_parts(data, len)),
                DType::U16 => HostSlice::U16(std::slice::from_raw_parts(data.cast(), len)),
                DType::U32 => HostSlice::U32(std::slice::from_raw_parts(data.cast(), len)),
                DType::U64 => HostSlice::U64(std::slice::from_raw_parts(data.cast(), len)),
                DType::I8 => HostSlice::I8(std::slice::from_raw_parts(data.cast(), len)),
                DType::I16 => HostSlice::I16(std::slice::from_raw_parts(data.cast(), len)),
                DType::I32 => HostSlice::I32(std::slice::from_raw_parts(data.cast(), len)),
                DType::I64 => HostSlice::I64(std::slice::from_raw_parts(data.cast(), len)),
                DType::F16 => HostSlice::F16(std::slice::from_raw_parts(data.cast(), len)),
                DType::BF16 => HostSlice::BF16(std::slice::from_raw_parts(data.cast(), len)),
                DType::F32 => HostSlice::F32(std::slice::from_raw_parts(data.cast(), len)),
                DType::F64 => HostSlice::F64(std::slice::from_raw_parts(data.cast(), len)),
            }
        }
    }

    /// The dtype of the elements.
    pub fn dtype(&self) -> DType {
        crate::with_host_data!(HostSlice, self, |v: T| {
            let _ = v;
            <T as Element>::DTYPE
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        crate::with_host_data!(HostSlice, self, |v: T| v.len())
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements as bytes, in native endianness.
    pub fn as_bytes(&self) -> &'a [u8] {
        crate::with_host_data!(HostSlice, *self, |v: T| bytemuck::cast_slice::<T, u8>(v))
    }

    /// The elements as `f64` (exact except for 64-bit integers above 2^53).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        crate::with_host_data!(HostSlice, self, |v: T| v.iter().map(|x| x.to_f64()).collect())
    }

    /// Copies the elements into an owned [`HostVec`].
    pub fn to_host_vec(&self) -> HostVec {
        crate::with_host_data!(HostSlice, self, |v: T| <T as Element>::vec(v.to_vec()))
    }
}

impl HostVec {
    /// Borrows the elements.
    pub fn as_slice(&self) -> HostSlice<'_> {
        crate::with_host_data!(HostVec, self, |v: T| <T as Element>::slice(v))
    }

    /// The dtype of the elements.
    pub fn dtype(&self) -> DType {
        self.as_slice().dtype()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements as writable bytes, in native endianness; `None` for
    /// bool, where most byte values are not a `bool`.
    pub fn as_bytes_mut(&mut self) -> Option<&mut [u8]> {
        use bytemuck::cast_slice_mut as bytes;
        Some(match self {
            HostVec::Bool(_) => return None,
            HostVec::U8(v) => v.as_mut_slice(),
            HostVec::U16(v) => bytes(v.as_mut_slice()),
            HostVec::U32(v) => bytes(v.as_mut_slice()),
            HostVec::U64(v) => bytes(v.as_mut_slice()),
            HostVec::I8(v) => bytes(v.as_mut_slice()),
            HostVec::I16(v) => bytes(v.as_mut_slice()),
            HostVec::I32(v) => bytes(v.as_mut_slice()),
            HostVec::I64(v) => bytes(v.as_mut_slice()),
            HostVec::F16(v) => bytes(v.as_mut_slice()),
            HostVec::BF16(v) => bytes(v.as_mut_slice()),
            HostVec::F32(v) => bytes(v.as_mut_slice()),
            HostVec::F64(v) => bytes(v.as_mut_slice()),
        })
    }

    /// A vector of `len` zeros (false for bool) of `dtype`.
    pub fn zeros(dtype: DType, len: usize) -> HostVec {
        match dtype {
            DType::Bool => HostVec::Bool(vec![false; len]),
            DType::U8 => HostVec::U8(vec![0; len]),
            DType::U16 => HostVec::U16(vec![0; len]),
            DType::U32 => HostVec::U32(vec![0; len]),
            DType::U64 => HostVec::U64(vec![0; len]),
            DType::I8 => HostVec::I8(vec![0; len]),
            DType::I16 => HostVec::I16(vec![0; len]),
            DType::I32 => HostVec::I32(vec![0; len]),
            DType::I64 => HostVec::I64(vec![0; len]),
            DType::F16 => HostVec::F16(vec![f16::ZERO; len]),
            DType::BF16 => HostVec::BF16(vec![bf16::ZERO; len]),
            DType::F32 => HostVec::F32(vec![0.0; len]),
            DType::F64 => HostVec::F64(vec![0.0; len]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_conversion_rejects_what_does_not_fit() {
        assert_eq!(u8::from_f64_exact(255.0), Some(255));
        assert_eq!(u8::from_f64_exact(256.0), None);
        assert_eq!(u8::from_f64_exact(-1.0), None);
        assert_eq!(i8::from_f64_exact(-128.0), Some(-128));
        assert_eq!(i32::from_f64_exact(0.5), None);
        assert_eq!(i64::from_f64_exact(f64::NAN), None);
        assert_eq!(u64::from_f64_exact(18446744073709551616.0), None);
        assert_eq!(bool::from_f64_exact(1.0), Some(true));
        assert_eq!(bool::from_f64_exact(2.0), None);
        assert!(f32::from_f64_exact(f64::NAN).unwrap().is_nan());
    }

    /// The nearest of the two values of the format around `x` (ties to the even
    /// bit pattern), by brute force over the neighbours `bits`, `bits ± 1`.
    fn nearest_by_search<T: Element>(x: f64, around: T, bits: fn(T) -> u16, from_bits: fn(u16) -> T) -> T {
        let b = bits(around);
        let candidates = [b.wrapping_sub(1), b, b.wrapping_add(1)].map(from_bits);
        let mut best = around;
        for c in candidates {
            let (dc, db) = ((c.to_f64() - x).abs(), (best.to_f64() - x).abs());
            if dc < db || (dc == db && bits(c).is_multiple_of(2) && bits(best) % 2 == 1) {
                best = c;
            }
        }
        best
    }

    #[test]
    fn f64_to_half_rounds_once() {
        // Values just above a halfway point between two f16 values, which one
        // rounding through f32 sends to the even neighbour below.
        let one_plus_half_ulp = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(f16_from_f64(one_plus_half_ulp).to_f64(), 1.0 + 2f64.powi(-10));
        assert_eq!(bf16_from_f64(1.0 + 2f64.powi(-8) + 2f64.powi(-40)).to_f64(), 1.0 + 2f64.powi(-7));
        let mut rng = crate::noise::XorShift::new(0x2545_F491_4F6C_DD1D);
        for _ in 0..200_000 {
            let x = f64::from_bits(rng.next_u64()) % 70000.0;
            if !x.is_finite() || x.abs() > 65504.0 {
                continue;
            }
            let h = f16_from_f64(x);
            assert_eq!(h, nearest_by_search(x, h, f16::to_bits, f16::from_bits), "f16 {x:e}");
            let b = bf16_from_f64(x);
            assert_eq!(b, nearest_by_search(x, b, bf16::to_bits, bf16::from_bits), "bf16 {x:e}");
        }
        assert!(f16_from_f64(1e6).is_infinite() && f16_from_f64(f64::NAN).is_nan());
        assert!(bf16_from_f64(1e300).is_infinite());
    }

    #[test]
    fn lerp_is_unfused_f32() {
        let (x0, x1, w) = (1.0f32, 3.0f32, 0.25f64);
        assert_eq!(f32::lerp(x0, x1, w), Some(1.5));
        assert_eq!(u8::lerp(1, 2, 0.5), None);
        let h = f16::lerp(f16::from_f32(1.0), f16::from_f32(2.0), 0.5).unwrap();
        assert_eq!(h.to_f32(), 1.5);
    }
}
