use proptest::prelude::*;
use robocache_cpu::half::{bf16, f16};
use robocache_cpu::strategies::{resample_case, ResampleCase};
use robocache_cpu::{resample, Boundary, DType, Element, Method, ResampleSpec, Stream, Targets, Times};

use crate::oracle::{self, Expect};

/// Unit roundoff of the dtype's storage and of its compute precision.
fn epsilons(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F16 => (2f64.powi(-11), 2f64.powi(-24)),
        DType::BF16 => (2f64.powi(-8), 2f64.powi(-24)),
        DType::F32 => (2f64.powi(-24), 2f64.powi(-24)),
        _ => (2f64.powi(-53), 2f64.powi(-53)),
    }
}

fn check<T: Element>(case: &ResampleCase) -> Result<(), TestCaseError> {
    let data: Vec<T> = case.stream.data_as();
    let out = resample(&case.stream.stream(&data), &case.targets(), &case.stream.spec)
        .map_err(|e| TestCaseError::fail(format!("valid case rejected: {e}")))?;
    let as_f64: Vec<f64> = data.iter().map(|v| v.to_f64()).collect();
    let fill = match case.stream.spec.boundary {
        Boundary::Fill(v) => T::from_f64_exact(v).map_or(f64::NAN, Element::to_f64),
        _ => f64::NAN,
    };
    let (expected, valid) = oracle::resample(&case.stream, &as_f64, &case.targets, case.target_len, fill);
    prop_assert_eq!(&out.valid, &valid, "valid mask");
    prop_assert_eq!(out.data.len(), expected.len());
    let (storage, compute) = epsilons(T::DTYPE);
    for (index, (got, want)) in out.data.iter().zip(&expected).enumerate() {
        let got = got.to_f64();
        match *want {
            Expect::Exact(v) => prop_assert!(got == v, "element {index}: got {got}, expected exactly {v}"),
            Expect::Linear { value, .. } if T::from_f64_rounded(value).is_some_and(|r| r.to_f64().is_infinite()) => {
                // Beyond the dtype's range (f16 extrapolation): rounds to infinity.
                let rounded = T::from_f64_rounded(value).map_or(f64::NAN, Element::to_f64);
                prop_assert!(got == rounded, "element {index}: got {got}, expected {rounded}");
            }
            Expect::Linear { value, scale } => {
                // One rounding into the storage dtype, a few in the compute precision,
                // and the subnormal spacing of f16.
                let tolerance = storage * 2.0 * value.abs() + 4.0 * compute * scale + 1e-7;
                prop_assert!(
                    (got - value).abs() <= tolerance,
                    "element {index}: got {got}, expected {value} ± {tolerance}"
                );
            }
            Expect::Slerp(v) => {
                let tolerance = 8.0 * storage + 1e-9;
                prop_assert!((got - v).abs() <= tolerance, "element {index}: got {got}, expected {v} ± {tolerance}");
            }
        }
    }
    // Slerp outputs have unit norm.
    let d = case.stream.shape[2];
    let (_, groups) = (0, case.stream.spec.channels.resolve(d).unwrap());
    for (row, sample) in out.data.chunks_exact(d).enumerate() {
        if !out.valid[row] && matches!(case.stream.spec.boundary, Boundary::Fill(_)) {
            continue;
        }
        for g in groups.iter().filter(|g| matches!(g.method, Method::Slerp { .. })) {
            for q in sample[g.range.clone()].chunks_exact(4) {
                let norm = q.iter().map(|v| v.to_f64().powi(2)).sum::<f64>().sqrt();
                prop_assert!((norm - 1.0).abs() <= 8.0 * storage, "slerp norm {norm}");
            }
        }
    }
    Ok(())
}

macro_rules! dtype_properties {
    ($($name:ident: $ty:ty,)*) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]
            $(
                #[test]
                fn $name(case in resample_case(<$ty as Element>::DTYPE)) {
                    check::<$ty>(&case)?;
                }
            )*
        }
    };
}

dtype_properties! {
    matches_oracle_f32: f32,
    matches_oracle_f64: f64,
    matches_oracle_f16: f16,
    matches_oracle_bf16: bf16,
    matches_oracle_u8: u8,
    matches_oracle_u16: u16,
    matches_oracle_u32: u32,
    matches_oracle_u64: u64,
    matches_oracle_i8: i8,
    matches_oracle_i16: i16,
    matches_oracle_i32: i32,
    matches_oracle_i64: i64,
    matches_oracle_bool: bool,
}

proptest! {
    /// Previous and nearest return samples of their own row, never blends.
    #[test]
    fn selection_returns_existing_samples(case in resample_case(DType::F32)) {
        let mut case = case;
        case.stream.spec = ResampleSpec::new(Method::Previous);
        for method in [Method::Previous, Method::Nearest] {
            case.stream.spec.channels = method.into();
            let data: Vec<f32> = case.stream.data_as();
            let out = resample(&case.stream.stream(&data), &case.targets(), &case.stream.spec).unwrap();
            let [_, s, d] = case.stream.shape;
            for (index, sample) in out.data.chunks_exact(d).enumerate() {
                let row = index / case.target_len;
                let rows = &data[row * s * d..(row + 1) * s * d];
                prop_assert!(rows.chunks_exact(d).any(|x| x == sample), "{method}: {sample:?} is not a sample of row {row}");
            }
        }
    }
}

/// docs/semantics.md: weights exact to 1e-6 with absolute epoch times at 1 kHz.
#[test]
fn epoch_timestamps_at_1khz_give_exact_weights() {
    let start = 1_731_000_000.123_456; // 2024-11, seconds since the epoch
    let samples = 4000; // 4 s at 1 kHz
    let times: Vec<f64> = (0..samples).map(|i| start + i as f64 * 1e-3).collect();
    // Channel 0 is 0 at even samples and 1 at odd ones, so between samples i and
    // i+1 the output is w or 1 − w: the weight itself. Channel 1 is the sample
    // index, so the output is i + w.
    let data: Vec<f32> = (0..samples).flat_map(|i| [(i % 2) as f32, i as f32]).collect();
    let stream = Stream::new(&data, [1, samples, 2], Times::Shared(&times));
    let targets: Vec<f64> = (0..1000).map(|k| start + 0.0005 + k as f64 * 0.003_7).collect();
    let out = resample(&stream, &Targets::shared(&targets), &ResampleSpec::new(Method::Linear)).unwrap();
    for (k, &q) in targets.iter().enumerate() {
        let i = times.partition_point(|&s| s <= q) - 1;
        let w = (q - times[i]) / (times[i + 1] - times[i]);
        let expected = if i % 2 == 0 { w } else { 1.0 - w };
        let got = out.data[2 * k] as f64;
        assert!((got - expected).abs() < 1e-6, "target {k}: weight {got}, expected {expected}");
        // Sanity: the weight is what the decimal times say (0.5 ms into a 1 ms step,
        // up to the f64 spacing of the epoch times, 2.4e-7 s).
        let nominal = ((q - start) * 1e3).fract();
        let apart = (w - nominal).abs();
        assert!(apart.min(1.0 - apart) < 1e-3, "{w} vs {nominal}");
    }
}

/// Subtracting a per-row origin and searching in f32 fails docs/semantics.md; this is
/// the case that shows it: 1 kHz samples an hour into a recording.
#[test]
fn an_hour_into_a_recording_at_1khz() {
    let times: Vec<f64> = (0..10).map(|i| 3600.0 + i as f64 * 1e-3).collect();
    let data: Vec<f64> = (0..10).map(|i| i as f64).collect();
    let stream = Stream::new(&data, [1, 10, 1], Times::Shared(&times));
    let q = 3600.0 + 4.25e-3;
    let out = resample(&stream, &Targets::shared(&[q]), &ResampleSpec::new(Method::Linear)).unwrap();
    assert!((out.data[0] - 4.25).abs() < 1e-6, "{}", out.data[0]);
}

#[test]
fn one_sample_rows_are_constant_and_valid_only_at_their_time() {
    let data = [7.0f32, 9.0];
    let times = [1.0, 5.0];
    let stream = Stream::new(&data, [2, 1, 1], Times::PerRow(&times));
    for boundary in [Boundary::Clamp, Boundary::Extrapolate] {
        let spec = ResampleSpec::new(Method::Linear).with_boundary(boundary);
        let out = resample(&stream, &Targets::shared(&[0.0, 1.0, 5.0, 9.0]), &spec).unwrap();
        assert_eq!(out.data, [7.0, 7.0, 7.0, 7.0, 9.0, 9.0, 9.0, 9.0]);
        assert_eq!(out.valid, [false, true, false, false, false, false, true, false]);
    }
}

#[test]
fn boundary_rules() {
    let data = [0.0f32, 10.0, 20.0];
    let stream = Stream::new(&data, [1, 3, 1], Times::Uniform { start: 1.0, hz: 1.0 });
    let targets = Targets::shared(&[0.0, 1.5, 3.0, 4.0]);
    let run = |b| resample(&stream, &targets, &ResampleSpec::new(Method::Linear).with_boundary(b)).unwrap().data;
    assert_eq!(run(Boundary::Clamp), [0.0, 5.0, 20.0, 20.0]);
    assert_eq!(run(Boundary::Extrapolate), [-10.0, 5.0, 20.0, 30.0]);
    assert_eq!(run(Boundary::Fill(-1.0)), [-1.0, 5.0, 20.0, -1.0]);
    // Extrapolate equals clamp for the other methods.
    let prev = resample(&stream, &targets, &ResampleSpec::new(Method::Previous).with_boundary(Boundary::Extrapolate));
    assert_eq!(prev.unwrap().data, [0.0, 0.0, 20.0, 20.0]);
}

#[test]
fn nearest_tie_takes_the_earlier_sample() {
    let data = [1u8, 2];
    let stream = Stream::new(&data, [1, 2, 1], Times::Shared(&[0.0, 1.0]));
    let out = resample(&stream, &Targets::shared(&[0.5, 0.50001]), &ResampleSpec::new(Method::Nearest)).unwrap();
    assert_eq!(out.data, [1, 2]);
}

#[test]
fn infinite_sample_is_returned_exactly_at_its_neighbours_time() {
    let data = [1.0f32, f32::INFINITY];
    let stream = Stream::new(&data, [1, 2, 1], Times::Shared(&[0.0, 1.0]));
    let out = resample(&stream, &Targets::shared(&[0.0, 1.0]), &ResampleSpec::new(Method::Linear)).unwrap();
    assert_eq!(out.data, [1.0, f32::INFINITY]);
}

proptest! {
    /// Into caller buffers (reused, dirty) gives what the allocating call gives.
    #[test]
    fn resample_into_reused_buffers_equals_resample(case in resample_case(DType::F32)) {
        let data: Vec<f32> = case.stream.data_as();
        let want = resample(&case.stream.stream(&data), &case.targets(), &case.stream.spec).unwrap();
        let mut out = vec![f32::NAN; want.data.len()];
        let mut valid = vec![true; want.valid.len()];
        let shape = robocache_cpu::resample_into(&case.stream.stream(&data), &case.targets(), &case.stream.spec, &mut out, &mut valid).unwrap();
        prop_assert_eq!(shape, want.shape);
        prop_assert_eq!(out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        prop_assert_eq!(&valid, &want.valid);
        let mut short = vec![0.0f32; want.data.len() - 1];
        let err = robocache_cpu::resample_into(&case.stream.stream(&data), &case.targets(), &case.stream.spec, &mut short, &mut vec![false; want.valid.len()]);
        let is_shape_mismatch = matches!(err, Err(robocache_cpu::Error::ShapeMismatch { .. }));
        prop_assert!(is_shape_mismatch, "{:?}", err);
    }
}
