//! Criterion benchmark of frame decoding through [`VideoFile::decode_yuv`]
//! on the committed LeRobot fixtures (48×32, 76 frames, g=2, written by
//! LeRobot 0.6.1): AV1 (rav1d) and H.264 (OpenH264), each as one request
//! for every frame (decoding throughput) and as one request per frame pair
//! (what a batch of scattered windows asks; per-request costs show). The
//! frames are small, so fixed costs per group of pictures and per request
//! weigh more here than on 480×640 cameras. HEVC (libde265) runs on this
//! crate's open-GOP fixture (176×150, 36 frames, x265's CRA key frames):
//! a request per pair there decodes the key frame before a leading picture too.

use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use robocache_video::VideoFile;

fn video(root: &str) -> VideoFile {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../robocache-datasets/tests/fixtures/lerobot")
        .join(root)
        .join("videos/observation.images.front/chunk-000/file-000.mp4");
    VideoFile::open(path).expect("the LeRobot fixture opens")
}

/// One request for every frame of `file`, and a request per pair of frames.
fn requests(c: &mut Criterion, group: &str, file: &VideoFile) {
    let all: Vec<usize> = (0..file.frames()).collect();
    let mut group = c.benchmark_group(group);
    group.throughput(Throughput::Elements(all.len() as u64));
    group.bench_function("one_request", |b| b.iter(|| file.decode_yuv(&all).expect("decodes")));
    group.bench_function("a_request_per_pair", |b| {
        b.iter(|| {
            for pair in all.chunks(2) {
                file.decode_yuv(pair).expect("decodes");
            }
        })
    });
    group.finish();
}

fn decode(c: &mut Criterion) {
    for codec in ["av1", "h264"] {
        requests(c, &format!("decode_{codec}_48x32"), &video(codec));
    }
    let hevc = VideoFile::open(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hevc_open_gop.mp4"))
        .expect("the HEVC fixture opens");
    requests(c, "decode_hevc_176x150", &hevc);
}

criterion_group!(benches, decode);
criterion_main!(benches);
