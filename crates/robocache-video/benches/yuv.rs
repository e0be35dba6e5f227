//! Criterion benchmark of the YUV 4:2:0 → RGB conversion on a 480×640
//! frame (LeRobot's usual camera size): throughput in pixels.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use robocache_video::Yuv420;

fn frame(width: usize, height: usize) -> Yuv420 {
    let mut frame = Yuv420::new(width, height);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for byte in frame.data.iter_mut() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        *byte = (state >> 56) as u8;
    }
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

criterion_group!(benches, to_rgb);
criterion_main!(benches);
