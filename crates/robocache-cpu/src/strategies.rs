//! Proptest strategies that generate valid inputs for every operation: the
//! CPU property tests check them against an `f64` oracle, the CUDA tests
//! check the GPU against the CPU on the same cases.
//!
//! Cases hold their data as `f64`; [`ResampleCase::data_as`] converts it to
//! the dtype under test (integral values for integer dtypes, unit
//! quaternions in slerp groups).

use proptest::collection::vec;
use proptest::prelude::*;

use crate::{
    Boundary, ChannelGroup, ChannelSpec, DType, Element, Method, Points, QuaternionOrder, ResampleSpec, Stream,
    Targets, Times, VoxelGrid, VoxelMode,
};

/// An owned timeline.
#[derive(Clone, Debug)]
pub enum TimesCase {
    Shared(Vec<f64>),
    PerRow(Vec<f64>),
    Uniform { start: f64, hz: f64 },
}

impl TimesCase {
    /// Borrows it as [`Times`].
    pub fn as_times(&self) -> Times<'_> {
        match self {
            TimesCase::Shared(t) => Times::Shared(t),
            TimesCase::PerRow(t) => Times::PerRow(t),
            TimesCase::Uniform { start, hz } => Times::Uniform { start: *start, hz: *hz },
        }
    }
}

/// One stream of a case: shapes, data, times, lengths and spec.
#[derive(Clone, Debug)]
pub struct StreamCase {
    /// `[B, S, D]`.
    pub shape: [usize; 3],
    /// `[B, S, D]` values, exactly representable in the case's dtype family.
    pub data: Vec<f64>,
    pub times: TimesCase,
    pub lengths: Option<Vec<usize>>,
    pub spec: ResampleSpec,
}

impl StreamCase {
    /// The data converted to `T` (rounded to nearest for float types).
    pub fn data_as<T: Element>(&self) -> Vec<T> {
        self.data
            .iter()
            .map(|&v| T::from_f64_rounded(v).or_else(|| T::from_f64_exact(v)).unwrap_or_else(T::zeroed))
            .collect()
    }

    /// The stream over `data` (as made by [`StreamCase::data_as`]).
    pub fn stream<'a, T>(&'a self, data: &'a [T]) -> Stream<'a, T> {
        Stream { data, shape: self.shape, times: self.times.as_times(), lengths: self.lengths.as_deref() }
    }
}

/// A valid resample: one stream and its targets.
#[derive(Clone, Debug)]
pub struct ResampleCase {
    pub stream: StreamCase,
    pub targets: TimesCase,
    pub target_len: usize,
}

impl ResampleCase {
    /// The targets.
    pub fn targets(&self) -> Targets<'_> {
        Targets { times: self.targets.as_times(), len: self.target_len }
    }
}

/// A valid fusion: streams of various dtypes with one batch size, the shared
/// targets and the output dtype.
#[derive(Clone, Debug)]
pub struct FusionCase {
    pub streams: Vec<(DType, StreamCase)>,
    pub targets: TimesCase,
    pub target_len: usize,
    pub dtype: DType,
}

impl FusionCase {
    /// The targets.
    pub fn targets(&self) -> Targets<'_> {
        Targets { times: self.targets.as_times(), len: self.target_len }
    }
}

/// The family of values a dtype holds, which decides data, methods and fill values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Float,
    Unsigned,
    Signed,
    Bool,
}

fn family(dtype: DType) -> Family {
    match dtype {
        DType::Bool => Family::Bool,
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => Family::Unsigned,
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => Family::Signed,
        DType::F16 | DType::BF16 | DType::F32 | DType::F64 => Family::Float,
    }
}

fn method(family: Family) -> BoxedStrategy<Method> {
    if family == Family::Float {
        prop_oneof![
            3 => Just(Method::Linear),
            1 => Just(Method::Nearest),
            1 => Just(Method::Previous),
            1 => Just(Method::Slerp { order: QuaternionOrder::Xyzw }),
            1 => Just(Method::Slerp { order: QuaternionOrder::Wxyz }),
        ]
        .boxed()
    } else {
        prop_oneof![Just(Method::Nearest), Just(Method::Previous)].boxed()
    }
}

/// A channel spec and its channel count: one method for all, or 1 to 4 groups.
fn channel_spec(family: Family) -> impl Strategy<Value = (ChannelSpec, usize)> {
    let width = |m: Method| -> BoxedStrategy<usize> {
        match m {
            Method::Slerp { .. } => prop_oneof![Just(4usize), Just(8usize)].boxed(),
            // Now and then a wide group: the GPU moves those in 16-byte words,
            // several per lane.
            _ => prop_oneof![6 => 1usize..=5, 1 => 60usize..=300].boxed(),
        }
    };
    let all = method(family).prop_flat_map(move |m| width(m).prop_map(move |w| (ChannelSpec::All(m), w)));
    let groups =
        vec(method(family).prop_flat_map(move |m| width(m).prop_map(move |w| (m, w))), 1..=4).prop_map(|parts| {
            let mut start = 0;
            let groups = parts
                .into_iter()
                .map(|(method, w)| {
                    let g = ChannelGroup { range: start..start + w, method };
                    start += w;
                    g
                })
                .collect();
            (ChannelSpec::Groups(groups), start)
        });
    prop_oneof![all, groups]
}

fn boundary(family: Family) -> impl Strategy<Value = Boundary> {
    let fill = match family {
        Family::Float => prop_oneof![Just(-1.5), Just(0.0), Just(1e3)].boxed(),
        Family::Bool => Just(1.0).boxed(),
        Family::Unsigned | Family::Signed => Just(3.0).boxed(),
    };
    prop_oneof![2 => Just(Boundary::Clamp), 2 => Just(Boundary::Extrapolate), 1 => fill.prop_map(Boundary::Fill)]
}

/// Strictly increasing times: a start (relative, or absolute epoch seconds)
/// and irregular steps from 1 ms to 0.5 s.
fn increasing(len: usize, epoch: bool) -> impl Strategy<Value = Vec<f64>> {
    let base = if epoch { 1.7e9 } else { 0.0 };
    (-5.0f64..5.0, vec(prop_oneof![0.001f64..0.01, 0.01f64..0.5], len)).prop_map(move |(start, steps)| {
        let mut t = base + start;
        steps
            .into_iter()
            .map(|step| {
                let now = t;
                t += step;
                now
            })
            .collect()
    })
}

fn source_times(batch: usize, len: usize, epoch: bool) -> impl Strategy<Value = TimesCase> {
    let base = if epoch { 1.7e9 } else { 0.0 };
    let hz = prop_oneof![Just(3.75), Just(10.0), Just(12.5), Just(30.0), Just(100.0), Just(1000.0)];
    prop_oneof![
        increasing(len, epoch).prop_map(TimesCase::Shared),
        vec(increasing(len, epoch), batch).prop_map(|rows| TimesCase::PerRow(rows.concat())),
        (-5.0f64..5.0, hz).prop_map(move |(start, hz)| TimesCase::Uniform { start: base + start, hz }),
    ]
}

/// The first and last source time over all rows.
fn time_range(times: &TimesCase, batch: usize, len: usize) -> (f64, f64) {
    let row = |b: usize| -> Vec<f64> {
        match times {
            TimesCase::Shared(t) => t.clone(),
            TimesCase::PerRow(t) => t[b * len..(b + 1) * len].to_vec(),
            TimesCase::Uniform { start, hz } => (0..len).map(|i| crate::uniform_time(*start, *hz, i)).collect(),
        }
    };
    (0..batch).map(row).fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| (lo.min(r[0]), hi.max(r[len - 1])))
}

/// Targets spread over and around the sources' range, some exactly on a
/// source time or halfway between two.
fn targets(times: TimesCase, batch: usize, len: usize, target_len: usize) -> impl Strategy<Value = TimesCase> {
    let (lo, hi) = time_range(&times, batch, len);
    let margin = 0.25 * (hi - lo) + 0.05;
    let sample_times: Vec<f64> = match &times {
        TimesCase::Shared(t) | TimesCase::PerRow(t) => t.clone(),
        TimesCase::Uniform { start, hz } => (0..len).map(|i| crate::uniform_time(*start, *hz, i)).collect(),
    };
    // Midpoints between neighbours, where nearest's tie rule decides.
    let midpoints: Vec<f64> = sample_times.windows(2).map(|w| w[0] + (w[1] - w[0]) / 2.0).chain([lo]).collect();
    let one = prop_oneof![
        3 => (lo - margin)..(hi + margin),
        1 => proptest::sample::select(sample_times),
        1 => proptest::sample::select(midpoints),
    ];
    prop_oneof![
        vec(one.clone(), target_len).prop_map(TimesCase::Shared),
        vec(one, batch * target_len).prop_map(TimesCase::PerRow),
        ((lo - margin)..(lo + margin), prop_oneof![Just(10.0), Just(50.0), Just(1000.0)])
            .prop_map(|(start, hz)| TimesCase::Uniform { start, hz }),
    ]
}

/// Data values for `family`, with every 4-channel quaternion of a slerp
/// group normalised.
fn data(family: Family, shape: [usize; 3], groups: Vec<ChannelGroup>) -> impl Strategy<Value = Vec<f64>> {
    let [b, s, d] = shape;
    let value = match family {
        Family::Float => (-100.0f64..100.0).boxed(),
        Family::Unsigned => (0u8..=100).prop_map(f64::from).boxed(),
        Family::Signed => (-100i8..=100).prop_map(f64::from).boxed(),
        Family::Bool => any::<bool>().prop_map(|v| v as u8 as f64).boxed(),
    };
    vec(value, b * s * d).prop_map(move |mut values| {
        for sample in values.chunks_exact_mut(d) {
            for g in groups.iter().filter(|g| matches!(g.method, Method::Slerp { .. })) {
                for q in sample[g.range.clone()].chunks_exact_mut(4) {
                    let n = q.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-3);
                    q.iter_mut().for_each(|v| *v /= n);
                }
            }
        }
        values
    })
}

/// One stream of `batch` rows: 1–9 samples, now and then 33–1100 (the GPU
/// places targets in rounds of 32 probes; uniform, shared or per row;
/// relative or epoch seconds), any channel spec and boundary the dtype
/// supports, with or without valid lengths.
pub fn stream_case(dtype: DType, batch: usize) -> impl Strategy<Value = StreamCase> {
    let family = family(dtype);
    let samples = prop_oneof![6 => 1usize..=9, 1 => 33usize..=1100];
    (samples, any::<bool>(), channel_spec(family), boundary(family), any::<bool>()).prop_flat_map(
        move |(len, epoch, (channels, d), boundary, trusted)| {
            let groups = channels.resolve(d).unwrap_or_default();
            let spec = ResampleSpec { channels, boundary, trusted };
            (
                source_times(batch, len, epoch),
                proptest::option::of(vec(1..=len, batch)),
                data(family, [batch, len, d], groups),
            )
                .prop_map(move |(times, lengths, data)| StreamCase {
                    shape: [batch, len, d],
                    data,
                    times,
                    lengths,
                    spec: spec.clone(),
                })
        },
    )
}

/// Resample cases for `dtype`: batch 1–3, a [`stream_case`], and 1–9 targets
/// per row spread over and around the samples.
pub fn resample_case(dtype: DType) -> impl Strategy<Value = ResampleCase> {
    (1usize..=3, 1usize..=9).prop_flat_map(move |(batch, target_len)| {
        stream_case(dtype, batch).prop_flat_map(move |stream| {
            let [_, len, _] = stream.shape;
            targets(stream.times.clone(), batch, len, target_len).prop_map(move |targets| ResampleCase {
                stream: stream.clone(),
                targets,
                target_len,
            })
        })
    })
}

/// Fusion cases: 1–3 streams of mixed dtypes (float, u8, bool), one batch,
/// targets around the first stream, a float output dtype.
pub fn fusion_case() -> impl Strategy<Value = FusionCase> {
    let dtype = prop_oneof![Just(DType::F32), Just(DType::BF16), Just(DType::F64), Just(DType::U8), Just(DType::Bool)];
    let output = prop_oneof![Just(DType::F32), Just(DType::F64), Just(DType::F16), Just(DType::BF16)];
    (1usize..=3, 1usize..=9, vec(dtype, 1..=3), output).prop_flat_map(|(batch, target_len, dtypes, output)| {
        let streams: Vec<_> = dtypes.iter().map(|&d| stream_case(d, batch).prop_map(move |s| (d, s))).collect();
        streams.prop_flat_map(move |streams| {
            let first = &streams[0].1;
            targets(first.times.clone(), batch, first.shape[1], target_len).prop_map(move |targets| FusionCase {
                streams: streams.clone(),
                targets,
                target_len,
                dtype: output,
            })
        })
    })
}

/// A valid voxelization: points (some outside, some non-finite), optional
/// features and clouds, grid and mode.
#[derive(Clone, Debug)]
pub struct VoxelCase {
    pub positions: Vec<f32>,
    pub features: Option<Vec<f32>>,
    pub feature_len: usize,
    pub cloud_of_point: Option<Vec<u32>>,
    pub clouds: usize,
    pub grid: VoxelGrid,
    pub mode: VoxelMode,
}

impl VoxelCase {
    /// Borrows the points.
    pub fn points(&self) -> Points<'_> {
        Points {
            positions: &self.positions,
            features: self.features.as_deref(),
            feature_len: self.feature_len,
            cloud_of_point: self.cloud_of_point.as_deref(),
            clouds: self.clouds,
        }
    }
}

fn coordinate() -> impl Strategy<Value = f32> {
    prop_oneof![
        20 => -1.0f32..5.0,
        // Exactly on voxel faces, where rounding decides.
        4 => (-2i32..12).prop_map(|k| k as f32 * 0.25),
        1 => Just(f32::NAN),
        1 => Just(f32::INFINITY),
    ]
}

/// Voxelization cases: 0–200 points, 1–3 clouds, 1–5 features, grids up to
/// 8³ with per-axis voxel sizes, every mode.
pub fn voxel_case() -> impl Strategy<Value = VoxelCase> {
    let mode =
        prop_oneof![Just(VoxelMode::Occupancy), Just(VoxelMode::Count), Just(VoxelMode::Mean), Just(VoxelMode::Max)];
    let grid = (vec(-1.0f32..1.0, 3), vec(prop_oneof![Just(0.25f32), 0.1f32..1.0], 3), vec(1usize..=8, 3)).prop_map(
        |(o, s, d)| VoxelGrid { origin: [o[0], o[1], o[2]], voxel_size: [s[0], s[1], s[2]], dims: [d[0], d[1], d[2]] },
    );
    (0usize..200, 1usize..=3, 1usize..=5, mode, grid).prop_flat_map(|(n, clouds, f, mode, grid)| {
        let features = matches!(mode, VoxelMode::Mean | VoxelMode::Max);
        (
            vec(coordinate(), n * 3),
            if features {
                // Some signed zeros and NaNs, where max must be exact about ±0 and ignore NaN.
                let feature =
                    prop_oneof![20 => -10.0f32..10.0, 1 => Just(0.0f32), 1 => Just(-0.0f32), 1 => Just(f32::NAN)];
                vec(feature, n * f).prop_map(Some).boxed()
            } else {
                Just(None).boxed()
            },
            proptest::option::of(vec(0u32..clouds as u32, n)),
        )
            .prop_map(move |(positions, features, cloud_of_point)| VoxelCase {
                positions,
                feature_len: if features.is_some() { f } else { 0 },
                features,
                clouds: if cloud_of_point.is_some() { clouds } else { 1 },
                cloud_of_point,
                grid,
                mode,
            })
    })
}
