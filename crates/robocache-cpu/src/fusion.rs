//! Multimodal alignment: `K` streams, each with its own rate, length, dtype
//! and channel spec, resampled onto one timeline and concatenated along the
//! channels (docs/semantics.md).

use rayon::prelude::*;

use crate::resample::resample_named;
use crate::{
    with_host_data, DType, Element, Error, HostSlice, HostVec, ResamplePlan, ResampleSpec, Result, Stream, Targets,
    TimeShape, Times,
};

/// One stream of a fusion: data `[B, S_k, D_k]` of any dtype, its times, valid
/// lengths and resample spec.
#[derive(Clone, Debug)]
pub struct FusionStream<'a> {
    pub data: HostSlice<'a>,
    /// `[B, S_k, D_k]`.
    pub shape: [usize; 3],
    pub times: Times<'a>,
    pub lengths: Option<&'a [usize]>,
    pub spec: ResampleSpec,
}

/// The streams, the shared targets and the output dtype.
#[derive(Clone, Debug)]
pub struct FusionInput<'a> {
    pub streams: Vec<FusionStream<'a>>,
    pub targets: Targets<'a>,
    /// The dtype of the output: a float dtype, or the dtype of every stream.
    pub dtype: DType,
}

/// The fused output `[B, T, ΣD_k]` and one valid mask per stream `[K, B, T]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Fused {
    pub data: HostVec,
    pub valid: Vec<bool>,
    /// `[B, T, ΣD_k]`.
    pub shape: [usize; 3],
    /// First output channel of each stream, then `ΣD_k`: stream `k` is
    /// channels `offsets[k]..offsets[k + 1]`.
    pub offsets: Vec<usize>,
}

/// What a fusion plan needs of one stream: no data, only shapes and spec.
#[derive(Clone, Debug)]
pub struct StreamShape<'a> {
    pub dtype: DType,
    /// `[B, S_k, D_k]`.
    pub shape: [usize; 3],
    pub data_len: usize,
    pub times: TimeShape,
    pub lengths_len: Option<usize>,
    pub spec: &'a ResampleSpec,
}

/// Validates a fusion without reading data: one [`ResamplePlan`] per stream,
/// the same batch size everywhere, and an output dtype every stream can be
/// converted to. Returns the plans and the channel offsets (`K + 1` of them).
pub fn plan_fusion_shapes(
    streams: &[StreamShape<'_>],
    targets: TimeShape,
    target_len: usize,
    dtype: DType,
) -> Result<(Vec<ResamplePlan>, Vec<usize>)> {
    let Some(first) = streams.first() else {
        return Err(Error::Empty { what: "fusion streams".into(), reason: "at least one stream is needed".into() });
    };
    let batch = first.shape[0];
    let mut offsets = vec![0usize];
    let mut plans = Vec::with_capacity(streams.len());
    for (k, stream) in streams.iter().enumerate() {
        let what = format!("stream {k}");
        if stream.shape[0] != batch {
            return Err(Error::ShapeMismatch {
                what: format!("{what} data (every stream needs the batch size {batch} of stream 0)"),
                shape: vec![batch, stream.shape[1], stream.shape[2]],
                expected: batch * stream.shape[1] * stream.shape[2],
                actual: stream.data_len,
            });
        }
        if !dtype.is_float() && stream.dtype != dtype {
            return Err(Error::DTypeMismatch {
                what: format!("{what} data (an integer or bool fusion output needs every stream in that dtype)"),
                expected: dtype.to_string(),
                actual: stream.dtype,
            });
        }
        let plan = ResamplePlan::from_shapes(
            &what,
            stream.dtype,
            stream.shape,
            stream.data_len,
            stream.times,
            stream.lengths_len,
            targets,
            target_len,
            stream.spec,
        )?;
        let end = offsets[k].checked_add(plan.channels).ok_or_else(|| Error::Overflow("fusion channels".into()))?;
        offsets.push(end);
        plans.push(plan);
    }
    Ok((plans, offsets))
}

/// [`plan_fusion_shapes`] for host streams.
pub fn plan_fusion(input: &FusionInput<'_>) -> Result<(Vec<ResamplePlan>, Vec<usize>)> {
    let shapes: Vec<StreamShape<'_>> = input
        .streams
        .iter()
        .map(|s| StreamShape {
            dtype: s.data.dtype(),
            shape: s.shape,
            data_len: s.data.len(),
            times: s.times.shape(),
            lengths_len: s.lengths.map(<[usize]>::len),
            spec: &s.spec,
        })
        .collect();
    plan_fusion_shapes(&shapes, input.targets.times.shape(), input.targets.len, input.dtype)
}

/// Resamples every stream onto `input.targets` and concatenates them along the
/// channels, converted to `input.dtype`. Equal, exactly, to the per-stream
/// [`resample`](crate::resample) results converted (rounded to nearest-even
/// through `f64`) and concatenated.
///
/// ```
/// use robocache_cpu::{fuse, DType, FusionInput, FusionStream, HostSlice, Method, ResampleSpec, Targets, Times};
///
/// let camera = [0.0f32, 1.0, 2.0, 3.0]; // 1 row, 2 samples at 30 Hz, 2 channels
/// let gripper = [0u8, 1, 1]; // 1 row, 3 samples at 10 Hz, 1 channel
/// let fused = fuse(&FusionInput {
///     streams: vec![
///         FusionStream { data: HostSlice::F32(&camera), shape: [1, 2, 2],
///             times: Times::Uniform { start: 0.0, hz: 30.0 }, lengths: None,
///             spec: ResampleSpec::new(Method::Linear) },
///         FusionStream { data: HostSlice::U8(&gripper), shape: [1, 3, 1],
///             times: Times::Uniform { start: 0.0, hz: 10.0 }, lengths: None,
///             spec: ResampleSpec::new(Method::Previous) },
///     ],
///     targets: Targets::shared(&[0.0, 0.1]),
///     dtype: DType::F32,
/// })?;
/// assert_eq!(fused.shape, [1, 2, 3]);
/// assert_eq!(fused.offsets, [0, 2, 3]);
/// assert_eq!(fused.valid, [true, false, true, true]); // [K, B, T]
/// # Ok::<(), robocache_cpu::Error>(())
/// ```
pub fn fuse(input: &FusionInput<'_>) -> Result<Fused> {
    let (plans, offsets) = plan_fusion(input)?;
    let batch = plans[0].batch;
    let target_len = input.targets.len;
    let width = *offsets.last().unwrap_or(&0);
    let mut data = HostVec::zeros(input.dtype, batch * target_len * width);
    let mut valid = Vec::with_capacity(plans.len() * batch * target_len);
    for (k, stream) in input.streams.iter().enumerate() {
        let what = format!("stream {k}");
        let resampled = with_host_data!(HostSlice, stream.data, |slice: T| {
            let typed = Stream { data: slice, shape: stream.shape, times: stream.times, lengths: stream.lengths };
            let out = resample_named::<T>(&what, &typed, &input.targets, &stream.spec)?;
            valid.extend_from_slice(&out.valid);
            <T as Element>::vec(out.data)
        });
        let columns = offsets[k]..offsets[k + 1];
        with_host_data!(HostVec, &mut data, |out: O| scatter_columns::<O>(out, width, columns, &resampled));
    }
    Ok(Fused { data, valid, shape: [batch, target_len, width], offsets })
}

/// Writes `[rows, columns.len()]` values of `source` into the `columns` of each
/// `width`-wide row of `out`, converting to `O`.
fn scatter_columns<O: Element>(out: &mut [O], width: usize, columns: std::ops::Range<usize>, source: &HostVec) {
    let stream_width = columns.len();
    if let Some(same) = O::from_host_slice(&source.as_slice()) {
        out.par_chunks_mut(width)
            .zip(same.par_chunks(stream_width))
            .for_each(|(row, src)| row[columns.clone()].copy_from_slice(src));
        return;
    }
    // Different dtypes: `O` is a float (checked by the plan), reached through f64.
    with_host_data!(HostSlice, source.as_slice(), |src: S| {
        out.par_chunks_mut(width).zip(src.par_chunks(stream_width)).for_each(|(row, src)| {
            for (o, s) in row[columns.clone()].iter_mut().zip(src) {
                *o = O::from_f64_rounded(s.to_f64()).unwrap_or(*o);
            }
        })
    });
}
