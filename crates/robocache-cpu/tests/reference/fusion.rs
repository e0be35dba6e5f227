use proptest::prelude::*;
use robocache_cpu::half::bf16;
use robocache_cpu::strategies::{fusion_case, StreamCase};
use robocache_cpu::{fuse, resample, DType, Element, FusionInput, FusionStream, HostVec, Targets};

fn host_data(dtype: DType, stream: &StreamCase) -> HostVec {
    match dtype {
        DType::F32 => HostVec::F32(stream.data_as()),
        DType::F64 => HostVec::F64(stream.data_as()),
        DType::BF16 => HostVec::BF16(stream.data_as()),
        DType::U8 => HostVec::U8(stream.data_as()),
        DType::Bool => HostVec::Bool(stream.data_as()),
        other => panic!("the fusion strategy makes no {other} streams"),
    }
}

fn resample_as_f64<T: Element>(stream: &StreamCase, targets: &Targets<'_>) -> (Vec<f64>, Vec<bool>) {
    let data: Vec<T> = stream.data_as();
    let out = resample(&stream.stream(&data), targets, &stream.spec).unwrap();
    (out.data.iter().map(|v| v.to_f64()).collect(), out.valid)
}

fn round_to(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F32 => f32::from_f64_rounded(v).unwrap().to_f64(),
        DType::F64 => v,
        DType::F16 => robocache_cpu::f16_from_f64(v).to_f64(),
        DType::BF16 => robocache_cpu::bf16_from_f64(v).to_f64(),
        other => panic!("no float output {other}"),
    }
}

proptest! {
    /// Fusion equals the per-stream resamples, converted and concatenated, exactly.
    #[test]
    fn fusion_is_concatenated_resamples(case in fusion_case()) {
        let data: Vec<HostVec> = case.streams.iter().map(|(d, s)| host_data(*d, s)).collect();
        let input = FusionInput {
            streams: case.streams.iter().zip(&data).map(|((_, s), data)| FusionStream {
                data: data.as_slice(),
                shape: s.shape,
                times: s.times.as_times(),
                lengths: s.lengths.as_deref(),
                spec: s.spec.clone(),
            }).collect(),
            targets: case.targets(),
            dtype: case.dtype,
        };
        let fused = fuse(&input).unwrap();
        let [batch, target_len, width] = fused.shape;
        let got: Vec<f64> = robocache_cpu::with_host_data!(HostVec, &fused.data, |v: T| v.iter().map(|x| x.to_f64()).collect());
        let mut masks = Vec::new();
        for (k, (dtype, stream)) in case.streams.iter().enumerate() {
            let (values, valid) = match dtype {
                DType::F32 => resample_as_f64::<f32>(stream, &case.targets()),
                DType::F64 => resample_as_f64::<f64>(stream, &case.targets()),
                DType::BF16 => resample_as_f64::<bf16>(stream, &case.targets()),
                DType::U8 => resample_as_f64::<u8>(stream, &case.targets()),
                _ => resample_as_f64::<bool>(stream, &case.targets()),
            };
            masks.extend(valid);
            let d = stream.shape[2];
            for r in 0..batch * target_len {
                for c in 0..d {
                    let want = round_to(case.dtype, values[r * d + c]);
                    let have = got[r * width + fused.offsets[k] + c];
                    prop_assert!(want == have, "stream {k} row {r} channel {c}: {have} != {want}");
                }
            }
        }
        prop_assert_eq!(fused.valid, masks);
    }
}
