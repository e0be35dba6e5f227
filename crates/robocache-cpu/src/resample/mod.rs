//! Resampling a batch of rows `[B, S, D]`, each with its own sample times,
//! onto target times `[B, T]` (docs/semantics.md).

mod slerp;
mod spec;

use rayon::prelude::*;

pub use slerp::slerp;
pub use spec::{Boundary, ChannelGroup, ChannelSpec, Method, QuaternionOrder, ResampleSpec};

use crate::times::{Position, RowTimes, TimeShape, Times};
use crate::{DType, Element, Error, Result};

/// A batch of rows to resample: data `[B, S, D]` row-major, the sample times,
/// and optionally the number of valid samples per row (the rest is padding).
#[derive(Clone, Copy, Debug)]
pub struct Stream<'a, T> {
    /// `[B, S, D]` row-major.
    pub data: &'a [T],
    /// `[B, S, D]`.
    pub shape: [usize; 3],
    /// Shared `[S]`, per row `[B, S]`, or uniform.
    pub times: Times<'a>,
    /// `n[B]` with `1 ≤ n_b ≤ S`; all `S` when absent.
    pub lengths: Option<&'a [usize]>,
}

impl<'a, T> Stream<'a, T> {
    /// A stream whose rows all have `S` valid samples.
    pub fn new(data: &'a [T], shape: [usize; 3], times: Times<'a>) -> Self {
        Stream { data, shape, times, lengths: None }
    }

    /// Sets the valid length of each row.
    pub fn with_lengths(mut self, lengths: &'a [usize]) -> Self {
        self.lengths = Some(lengths);
        self
    }
}

/// The target times: shared `[T]`, per row `[B, T]`, or uniform with `T` targets.
#[derive(Clone, Copy, Debug)]
pub struct Targets<'a> {
    pub times: Times<'a>,
    /// `T`, the number of targets per row.
    pub len: usize,
}

impl<'a> Targets<'a> {
    /// The same targets for every row.
    pub fn shared(times: &'a [f64]) -> Self {
        Targets { times: Times::Shared(times), len: times.len() }
    }

    /// `[B, T]` targets, `len` = `T`.
    pub fn per_row(times: &'a [f64], len: usize) -> Self {
        Targets { times: Times::PerRow(times), len }
    }

    /// `len` targets `start + k / hz`.
    pub fn uniform(start: f64, hz: f64, len: usize) -> Self {
        Targets { times: Times::Uniform { start, hz }, len }
    }
}

/// The result of a resample: data `[B, T, D]` and the valid mask `[B, T]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Resampled<T> {
    pub data: Vec<T>,
    pub valid: Vec<bool>,
    /// `[B, T, D]`.
    pub shape: [usize; 3],
}

/// A checked resample: shapes agree, the channel groups cover the channels,
/// every method is defined for the dtype, the fill value fits.
///
/// Built from shapes and the spec alone (no data is read), so every backend
/// validates the same way before it launches anything.
#[derive(Clone, Debug, PartialEq)]
pub struct ResamplePlan {
    pub batch: usize,
    pub source_len: usize,
    pub target_len: usize,
    pub channels: usize,
    pub dtype: DType,
    pub groups: Vec<ChannelGroup>,
    pub boundary: Boundary,
}

impl ResamplePlan {
    /// Checks everything about a resample that does not need the data.
    /// `what` names the stream in errors ("resample", "stream 2", …).
    pub fn new(
        what: &str,
        dtype: DType,
        shape: [usize; 3],
        data_len: usize,
        times: &Times<'_>,
        lengths_len: Option<usize>,
        targets: &Targets<'_>,
        spec: &ResampleSpec,
    ) -> Result<Self> {
        let target_shape = targets.times.shape();
        Self::from_shapes(what, dtype, shape, data_len, times.shape(), lengths_len, target_shape, targets.len, spec)
    }

    /// [`ResamplePlan::new`] from shapes alone, for data that lives on a device.
    pub fn from_shapes(
        what: &str,
        dtype: DType,
        shape: [usize; 3],
        data_len: usize,
        times: TimeShape,
        lengths_len: Option<usize>,
        targets: TimeShape,
        target_len: usize,
        spec: &ResampleSpec,
    ) -> Result<Self> {
        let [batch, source_len, channels] = shape;
        let empty = |dim: &str, reason: &str| Error::Empty { what: format!("{what} {dim}"), reason: reason.into() };
        if batch == 0 {
            return Err(empty("batch (B)", "there are no rows to resample"));
        }
        if source_len == 0 {
            return Err(empty("source samples (S)", "a row needs at least one sample"));
        }
        if channels == 0 {
            return Err(empty("channels (D)", "a sample needs at least one channel"));
        }
        if target_len == 0 {
            return Err(empty("targets (T)", "there are no target times"));
        }
        let expected = shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| Error::Overflow(format!("{what} data")))?;
        if expected != data_len {
            return Err(Error::ShapeMismatch {
                what: format!("{what} data"),
                shape: shape.to_vec(),
                expected,
                actual: data_len,
            });
        }
        batch
            .checked_mul(target_len)
            .and_then(|v| v.checked_mul(channels))
            .ok_or_else(|| Error::Overflow(format!("{what} output")))?;
        times.check(&format!("{what} source times"), batch, source_len)?;
        targets.check(&format!("{what} target times"), batch, target_len)?;
        if let Some(len) = lengths_len {
            if len != batch {
                return Err(Error::ShapeMismatch {
                    what: format!("{what} valid lengths"),
                    shape: vec![batch],
                    expected: batch,
                    actual: len,
                });
            }
        }
        let groups =
            spec.channels.resolve(channels).map_err(|reason| Error::ChannelSpec { what: what.to_owned(), reason })?;
        if !dtype.is_float() {
            if let Some(group) = groups.iter().find(|g| !g.method.is_selection()) {
                return Err(Error::UnsupportedMethod { what: what.to_owned(), method: group.method, dtype });
            }
        }
        Ok(ResamplePlan { batch, source_len, target_len, channels, dtype, groups, boundary: spec.boundary })
    }

    /// [`ResamplePlan::new`] for a host stream.
    pub fn for_stream<T: Element>(
        what: &str,
        stream: &Stream<'_, T>,
        targets: &Targets<'_>,
        spec: &ResampleSpec,
    ) -> Result<Self> {
        let lengths = stream.lengths.map(<[usize]>::len);
        Self::new(what, T::DTYPE, stream.shape, stream.data.len(), &stream.times, lengths, targets, spec)
    }

    /// Shape of the output, `[B, T, D]`.
    pub fn output_shape(&self) -> [usize; 3] {
        [self.batch, self.target_len, self.channels]
    }
}

/// The fill value of `boundary` as the bits of one `dtype` element (little
/// end first in a `u64`), checked; `None` for the other boundary rules.
pub fn fill_bits(what: &str, dtype: DType, boundary: Boundary) -> Result<Option<u64>> {
    fn bits<T: Element>(what: &str, boundary: Boundary) -> Result<Option<u64>> {
        Ok(fill_value::<T>(what, boundary)?.map(|v| {
            let mut word = [0u8; 8];
            let bytes = bytemuck::bytes_of(&v);
            word[..bytes.len()].copy_from_slice(bytes);
            u64::from_le_bytes(word)
        }))
    }
    match dtype {
        DType::Bool => bits::<bool>(what, boundary),
        DType::U8 => bits::<u8>(what, boundary),
        DType::U16 => bits::<u16>(what, boundary),
        DType::U32 => bits::<u32>(what, boundary),
        DType::U64 => bits::<u64>(what, boundary),
        DType::I8 => bits::<i8>(what, boundary),
        DType::I16 => bits::<i16>(what, boundary),
        DType::I32 => bits::<i32>(what, boundary),
        DType::I64 => bits::<i64>(what, boundary),
        DType::F16 => bits::<half::f16>(what, boundary),
        DType::BF16 => bits::<half::bf16>(what, boundary),
        DType::F32 => bits::<f32>(what, boundary),
        DType::F64 => bits::<f64>(what, boundary),
    }
}

/// The fill value of `boundary` in `T`, checked.
fn fill_value<T: Element>(what: &str, boundary: Boundary) -> Result<Option<T>> {
    match boundary {
        Boundary::Fill(value) => {
            T::from_f64_exact(value).map(Some).ok_or(Error::FillValue { what: what.to_owned(), value, dtype: T::DTYPE })
        }
        Boundary::Clamp | Boundary::Extrapolate => Ok(None),
    }
}

/// Checks the valid lengths and, unless `trusted`, the source and target times.
fn check_data<T>(
    what: &str,
    plan: &ResamplePlan,
    stream: &Stream<'_, T>,
    targets: &Targets<'_>,
    trusted: bool,
) -> Result<()> {
    if let Some(lengths) = stream.lengths {
        if let Some((row, &length)) = lengths.iter().enumerate().find(|(_, &n)| n == 0 || n > plan.source_len) {
            return Err(Error::BadLength {
                what: format!("{what} valid lengths"),
                row,
                length: length as u64,
                samples: plan.source_len,
            });
        }
    }
    // Targets are always checked: they are cheap and a NaN target has no answer.
    targets.times.check_finite(&format!("{what} target times"), plan.target_len)?;
    if !trusted {
        let length = |row: usize| stream.lengths.map_or(plan.source_len, |l| l[row]);
        stream.times.check_increasing(&format!("{what} source times"), plan.batch, plan.source_len, length)?;
    }
    Ok(())
}

/// Resamples `stream` at `targets` (docs/semantics.md). Rows run in parallel.
///
/// ```
/// use robocache_cpu::{resample, Method, ResampleSpec, Stream, Targets, Times};
///
/// // One row of 3 samples of 1 channel at t = 0, 1, 2, read at t = 0.5 and 3.
/// let data = [0.0f32, 10.0, 20.0];
/// let stream = Stream::new(&data, [1, 3, 1], Times::Shared(&[0.0, 1.0, 2.0]));
/// let out = resample(&stream, &Targets::shared(&[0.5, 3.0]), &ResampleSpec::new(Method::Linear))?;
/// assert_eq!(out.data, [5.0, 20.0]);
/// assert_eq!(out.valid, [true, false]);
/// # Ok::<(), robocache_cpu::Error>(())
/// ```
pub fn resample<T: Element>(
    stream: &Stream<'_, T>,
    targets: &Targets<'_>,
    spec: &ResampleSpec,
) -> Result<Resampled<T>> {
    resample_named("resample", stream, targets, spec)
}

/// [`resample`] with `what` naming the stream in errors.
pub(crate) fn resample_named<T: Element>(
    what: &str,
    stream: &Stream<'_, T>,
    targets: &Targets<'_>,
    spec: &ResampleSpec,
) -> Result<Resampled<T>> {
    let plan = ResamplePlan::for_stream(what, stream, targets, spec)?;
    let [batch, target_len, channels] = plan.output_shape();
    let mut data = vec![T::zeroed(); batch * target_len * channels];
    let mut valid = vec![false; batch * target_len];
    resample_planned(what, &plan, stream, targets, spec, &mut data, &mut valid)?;
    Ok(Resampled { data, valid, shape: [batch, target_len, channels] })
}

/// [`resample`] into buffers the caller owns: `out` `[B, T, D]` and `valid`
/// `[B, T]`. Reusing them across calls (as a training loop does) saves the
/// allocation and the first-touch page faults of a fresh output, which on
/// large batches cost as much as the resample itself. Returns `[B, T, D]`.
pub fn resample_into<T: Element>(
    stream: &Stream<'_, T>,
    targets: &Targets<'_>,
    spec: &ResampleSpec,
    out: &mut [T],
    valid: &mut [bool],
) -> Result<[usize; 3]> {
    let what = "resample";
    let plan = ResamplePlan::for_stream(what, stream, targets, spec)?;
    let shape = plan.output_shape();
    for (name, actual, expected) in
        [("output", out.len(), shape.iter().product::<usize>()), ("valid mask", valid.len(), shape[0] * shape[1])]
    {
        if actual != expected {
            return Err(Error::ShapeMismatch {
                what: format!("{what} {name}"),
                shape: if name == "output" { shape.to_vec() } else { shape[..2].to_vec() },
                expected,
                actual,
            });
        }
    }
    resample_planned(what, &plan, stream, targets, spec, out, valid)?;
    Ok(shape)
}

/// Checks the data and fills `data` / `valid` (of the plan's output sizes).
fn resample_planned<T: Element>(
    what: &str,
    plan: &ResamplePlan,
    stream: &Stream<'_, T>,
    targets: &Targets<'_>,
    spec: &ResampleSpec,
    data: &mut [T],
    valid: &mut [bool],
) -> Result<()> {
    let fill = fill_value::<T>(what, spec.boundary)?;
    check_data(what, plan, stream, targets, spec.trusted)?;
    let [_, target_len, channels] = plan.output_shape();
    let row_stride = plan.source_len * channels;
    let target_time = |row: usize, target: usize| match targets.times {
        Times::Shared(t) => t[target],
        Times::PerRow(t) => t[row * target_len + target],
        Times::Uniform { start, hz } => crate::times::uniform_time(start, hz, target),
    };
    // When every row has the same source times, valid length and targets,
    // each target is placed once for the whole batch.
    let same_for_all_rows = !matches!(stream.times, Times::PerRow(_))
        && !matches!(targets.times, Times::PerRow(_))
        && stream.lengths.is_none_or(|l| l.iter().all(|&n| n == l[0]));
    let shared_positions: Option<Vec<Position>> = same_for_all_rows.then(|| {
        let n = stream.lengths.map_or(plan.source_len, |l| l[0]);
        let times = stream.times.row(0, plan.source_len);
        (0..target_len).map(|t| times.locate(n, target_time(0, t))).collect()
    });
    data.par_chunks_mut(channels)
        .zip(valid.par_iter_mut())
        .enumerate()
        .with_min_len((4096 / channels).max(1))
        .for_each(|(flat, (out, valid))| {
            let (row, target) = (flat / target_len, flat % target_len);
            let q = target_time(row, target);
            let samples = &stream.data[row * row_stride..(row + 1) * row_stride];
            let n = stream.lengths.map_or(plan.source_len, |l| l[row]);
            let times = stream.times.row(row, plan.source_len);
            let position = match &shared_positions {
                Some(positions) => positions[target],
                None => times.locate(n, q),
            };
            *valid = resample_one(plan, fill, samples, times, n, q, position, out);
        });
    Ok(())
}

/// Two samples and the weight of the second: `x_lower + weight·(x_upper − x_lower)`.
#[derive(Clone, Copy, Debug)]
struct Segment {
    lower: usize,
    upper: usize,
    weight: f64,
}

impl Segment {
    fn at(index: usize) -> Self {
        Segment { lower: index, upper: index, weight: 0.0 }
    }

    fn between(times: &RowTimes<'_>, lower: usize, q: f64) -> Self {
        let (s0, s1) = (times.get(lower), times.get(lower + 1));
        Segment { lower, upper: lower + 1, weight: (q - s0) / (s1 - s0) }
    }
}

/// Computes one output sample (all `D` channels) at time `q`, placed at
/// `position` among the `n` valid samples of its row; returns whether `q`
/// lies inside the row's time range.
#[inline]
fn resample_one<T: Element>(
    plan: &ResamplePlan,
    fill: Option<T>,
    samples: &[T],
    times: RowTimes<'_>,
    n: usize,
    q: f64,
    position: Position,
    out: &mut [T],
) -> bool {
    let inside = matches!(position, Position::Inside { .. });
    if let (false, Some(fill)) = (inside, fill) {
        out.fill(fill);
        return false;
    }
    // The interpolation segment, without and with extrapolation.
    let interpolate = match position {
        Position::Inside { index } if index + 1 < n => Segment::between(&times, index, q),
        Position::Inside { index } => Segment::at(index),
        Position::Below => Segment::at(0),
        Position::Above => Segment::at(n - 1),
    };
    let extrapolate = match position {
        Position::Below if n >= 2 => Segment::between(&times, 0, q),
        Position::Above if n >= 2 => Segment::between(&times, n - 2, q),
        _ => interpolate,
    };
    let channels = plan.channels;
    let sample = |index: usize| &samples[index * channels..(index + 1) * channels];
    for group in &plan.groups {
        let range = group.range.clone();
        match group.method {
            Method::Linear => {
                let segment = if plan.boundary == Boundary::Extrapolate { extrapolate } else { interpolate };
                let (x0, x1) = (&sample(segment.lower)[range.clone()], &sample(segment.upper)[range.clone()]);
                let out = &mut out[range];
                // At a sample time the result is that sample exactly (even
                // when its neighbour is infinite).
                if segment.weight == 0.0 || T::lerp_slice(out, x0, x1, segment.weight).is_none() {
                    out.copy_from_slice(x0);
                }
            }
            Method::Nearest | Method::Previous => {
                let index = match position {
                    Position::Inside { index } if group.method == Method::Nearest && index + 1 < n => {
                        // The earlier sample unless the later one is strictly closer.
                        if times.get(index + 1) - q < q - times.get(index) {
                            index + 1
                        } else {
                            index
                        }
                    }
                    Position::Inside { index } => index,
                    Position::Below => 0,
                    Position::Above => n - 1,
                };
                out[range.clone()].copy_from_slice(&sample(index)[range]);
            }
            Method::Slerp { .. } => {
                let x0 = &sample(interpolate.lower)[range.clone()];
                let x1 = &sample(interpolate.upper)[range.clone()];
                for ((o, a), b) in out[range].chunks_exact_mut(4).zip(x0.chunks_exact(4)).zip(x1.chunks_exact(4)) {
                    let to_f64 = |q: &[T]| -> [f64; 4] { std::array::from_fn(|k| q[k].to_f64()) };
                    let r = slerp(to_f64(a), to_f64(b), interpolate.weight);
                    for (o, (r, a)) in o.iter_mut().zip(r.iter().zip(a)) {
                        *o = T::from_f64_rounded(*r).unwrap_or(*a);
                    }
                }
            }
        }
    }
    inside
}
