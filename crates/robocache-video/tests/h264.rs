//! H.264 decoded by OpenH264 against FFmpeg's decoder (PyAV), frame for
//! frame, on streams written by libx264 (`tests/fixtures/make_h264_fixtures.py`):
//! High profile with B-frames in a pyramid (frames leave the decoder in
//! another order than they enter), and Baseline with a cropped size.

use std::path::PathBuf;

use robocache_video::{Codec, VideoFile};

fn fixture(name: &str) -> (VideoFile, Vec<Vec<u8>>) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let file = VideoFile::open(dir.join(format!("{name}.mp4"))).unwrap();
    let mut archive = npyz::npz::NpzArchive::open(dir.join(format!("{name}.npz"))).unwrap();
    let npy = archive.by_name("yuv").unwrap().expect("the npz holds `yuv`");
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let bytes: Vec<u8> = npy.into_vec().unwrap();
    let frames = bytes.chunks(shape[1]).map(<[u8]>::to_vec).collect();
    (file, frames)
}

fn check(name: &str, width: usize, height: usize, frames: usize) {
    let (file, ffmpeg) = fixture(name);
    assert_eq!((file.codec(), file.width(), file.height(), file.frames()), (Codec::H264, width, height, frames));
    assert_eq!(ffmpeg.len(), frames);
    let all: Vec<usize> = (0..frames).collect();
    let decoded = file.decode_yuv(&all).unwrap();
    for (index, frame) in decoded.iter().enumerate() {
        assert_eq!((frame.width, frame.height), (width, height));
        assert_eq!(frame.data, ffmpeg[index], "{name}: frame {index} of one pass");
    }
    // Each frame on its own, last first: every group of pictures decoded
    // again from its key frame, B-frames included.
    for index in all.iter().copied().rev() {
        assert_eq!(file.decode_yuv(&[index]).unwrap()[0].data, ffmpeg[index], "{name}: frame {index} alone");
    }
    // Scattered frames of several groups, repeated, out of order.
    let picks = [frames - 1, 1, 2, 2, frames / 2, 0, frames / 3 + 1];
    for (frame, &index) in file.decode_yuv(&picks).unwrap().iter().zip(&picks) {
        assert_eq!(frame.data, ffmpeg[index], "{name}: frame {index} among others");
    }
}

#[test]
fn high_profile_b_frames_equal_ffmpeg() {
    check("high_bframes", 64, 48, 40);
}

#[test]
fn baseline_cropped_frames_equal_ffmpeg() {
    check("baseline_cropped", 50, 30, 20);
}
