//! Criterion benchmarks on a 480×640 frame (LeRobot's usual camera size),
//! throughput in pixels: the YUV 4:2:0 → RGB conversion, and the split of
//! an NV12 picture (NVDEC's) into planes, beside the same split a byte at
//! a time (how it was written before `Yuv420::from_nv12`).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use robocache_video::Yuv420;

fn frame(width: usize, height: usize) -> Yuv420 {
    let mut frame = Yuv420::new(width, height);
    let mut rng = robocache_cpu::noise::XorShift::new(0x9E37_79B9_7F4A_7C15);
    frame.data.iter_mut().for_each(|byte| *byte = rng.next_byte());
    frame
}

fn to_rgb(c: &mut Criterion) {
    let (width, height) = (640, 480);
    let yuv = frame(width, height);
    let mut rgb = vec![0u8; width * height * 3];
    let mut group = c.benchmark_group("yuv420_to_rgb");
    group.throughput(Throughput::Elements((width * height) as u64));
    group.bench_function("480x640", |b| b.iter(|| yuv.to_rgb_into(&mut rgb)));
    group.finish();
}

/// NV12 into planes a byte at a time: the baseline.
fn nv12_byte_at_a_time(width: usize, height: usize, nv12: &[u8]) -> Yuv420 {
    let mut out = Yuv420::new(width, height);
    let cw = width.div_ceil(2);
    let (luma, chroma) = nv12.split_at(width * height);
    out.plane_mut(0).copy_from_slice(luma);
    for plane in [1, 2] {
        for (row, line) in out.plane_mut(plane).chunks_exact_mut(cw).enumerate() {
            let pairs = &chroma[row * width..row * width + 2 * cw];
            for (out, pair) in line.iter_mut().zip(pairs.chunks_exact(2)) {
                *out = pair[plane - 1];
            }
        }
    }
    out
}

fn nv12_split(c: &mut Criterion) {
    let (width, height) = (640, 480);
    let nv12 = frame(width, height).data;
    let mut group = c.benchmark_group("nv12_to_planes");
    group.throughput(Throughput::Elements((width * height) as u64));
    group.bench_function("480x640", |b| b.iter(|| Yuv420::from_nv12(width, height, &nv12, width, height)));
    group.bench_function("480x640_byte_at_a_time", |b| b.iter(|| nv12_byte_at_a_time(width, height, &nv12)));
    group.finish();
}

criterion_group!(benches, to_rgb, nv12_split);
criterion_main!(benches);
