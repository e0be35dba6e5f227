//! Criterion benchmark of the frame crop and resize on the CPU (the CPU
//! backend's `convert_frames`, one frame): a 480×640 camera frame's centre
//! 480×480 to 224×224 and to 96×96, throughput in source pixels.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use robocache_video::{CropBox, FrameResize};

fn resize(c: &mut Criterion) {
    let (width, height) = (640, 480);
    let frame = robocache_cpu::noise::bytes(0x9E37_79B9_7F4A_7C15, width * height * 3);
    let crop = CropBox { left: 80, top: 0, width: 480, height: 480 };
    let mut group = c.benchmark_group("resize_rgb");
    group.throughput(Throughput::Elements((crop.width * crop.height) as u64));
    for side in [224, 96] {
        let plan = FrameResize { width: side, height: side, crop: Some(crop) }.plan(width, height).unwrap();
        let (mut rows, mut out) = (vec![0u8; plan.intermediate_len()], vec![0u8; side * side * 3]);
        group.bench_function(format!("480x640 centre crop to {side}x{side}"), |b| {
            b.iter(|| plan.resize_rgb_into(&frame, &mut rows, &mut out))
        });
    }
    group.finish();
}

criterion_group!(benches, resize);
criterion_main!(benches);
