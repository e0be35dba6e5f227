//! The LeRobot fixtures' MP4 files (written by LeRobot 0.6.1 with FFmpeg:
//! libsvtav1 and libx264) demuxed, and the AV1 ones decoded.

mod support;

use std::path::PathBuf;

use support::crate_dir;

use robocache_video::{Codec, DecoderChoice, Error, VideoFile};

fn video(root: &str, camera: &str) -> PathBuf {
    crate_dir()
        .join("../robocache-datasets/tests/fixtures/lerobot")
        .join(root)
        .join(format!("videos/observation.images.{camera}/chunk-000/file-000.mp4"))
}

#[test]
fn lerobot_av1_files_demux_and_decode() {
    let file = VideoFile::open(video("av1", "front")).unwrap();
    assert_eq!((file.codec(), file.width(), file.height(), file.frames()), (Codec::Av1, 48, 32, 76));
    assert_eq!(file.average_fps(), 10.0);
    assert_eq!(file.frame_time(13), Some(1.3));
    assert_eq!(file.frame_at(1.3).unwrap(), 13);
    assert_eq!(file.frame_at(1.349).unwrap(), 13);
    assert!(matches!(file.frame_at(7.6), Err(Error::FrameOutOfRange { frame: 76, frames: 76, .. })));
    // Any order, repeats, frames of several groups of pictures at once.
    let frames = file.decode_rgb(&[75, 3, 3, 0, 40]).unwrap();
    assert_eq!(frames.len(), 5);
    assert_eq!(frames[1], frames[2]);
    assert!(frames.iter().all(|f| f.len() == 48 * 32 * 3));
    let one = file.decode_rgb(&[40]).unwrap();
    assert_eq!(one[0], frames[4], "a frame decodes the same from any starting point");
}

#[test]
fn lerobot_h264_files_demux_and_decode() {
    let file = VideoFile::open(video("h264", "wrist")).unwrap();
    assert_eq!((file.codec(), file.width(), file.height(), file.frames()), (Codec::H264, 48, 32, 76));
    // Every frame in one call, then each frame on its own in reverse (a new
    // group of pictures each time): the same pixels from any starting point.
    let all: Vec<usize> = (0..file.frames()).collect();
    let frames = file.decode_rgb(&all).unwrap();
    assert!(frames.iter().all(|f| f.len() == 48 * 32 * 3));
    assert!(frames.windows(2).any(|pair| pair[0] != pair[1]), "the frames differ");
    for index in all.into_iter().rev() {
        assert_eq!(file.decode_rgb(&[index]).unwrap()[0], frames[index], "frame {index}");
    }
    let repeated = file.decode_rgb(&[75, 3, 3, 0, 40]).unwrap();
    assert_eq!(repeated, [&frames[75], &frames[3], &frames[3], &frames[0], &frames[40]].map(Clone::clone));
}

#[test]
fn broken_files_are_clear_errors() {
    let dir = std::env::temp_dir().join(format!("robocache-video-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = std::fs::read(video("av1", "front")).unwrap();
    for (name, data) in
        [("empty.mp4", &bytes[..0]), ("half.mp4", &bytes[..bytes.len() / 2]), ("head.mp4", &bytes[..40])]
    {
        let path = dir.join(name);
        std::fs::write(&path, data).unwrap();
        let err = VideoFile::open(&path).unwrap_err().to_string();
        assert!(err.contains(name), "{err}");
    }
    let err = VideoFile::open(dir.join("missing.mp4")).unwrap_err().to_string();
    assert!(err.contains("missing.mp4"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

const NVDEC: DecoderChoice = DecoderChoice::Nvdec { device: 0 };

/// The error NVDEC gives for frames `indices` of a broken `file`; `None`
/// where this machine has no NVDEC at all (no driver: the check is
/// skipped with the reason, unless `ROBOCACHE_REQUIRE_CUDA=1`, as the GPU
/// bundle's run.sh sets it, where that fails the test). Any other answer,
/// frames included, is the check's to judge.
#[allow(clippy::print_stderr)]
fn nvdec_error(file: &VideoFile, indices: &[usize]) -> Option<Error> {
    match file.decode_yuv_on(indices, NVDEC) {
        Err(Error::NvdecUnavailable { source: reason, .. }) => {
            let required = std::env::var("ROBOCACHE_REQUIRE_CUDA").is_ok_and(|v| v == "1");
            assert!(!required, "ROBOCACHE_REQUIRE_CUDA=1 but NVDEC is not available: {reason}");
            eprintln!("NVDEC not available, not checked: {reason}");
            None
        }
        Err(error) => Some(error),
        Ok(frames) => panic!("NVDEC decoded {} frames of a broken file", frames.len()),
    }
}

#[test]
fn mislabelled_and_corrupt_h264_are_clear_errors() {
    let dir = std::env::temp_dir().join(format!("robocache-video-h264-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = std::fs::read(video("h264", "front")).unwrap();
    // The same track labelled HEVC: demuxed, then its avcC record and
    // samples read as HEVC fail, naming the file and the frame.
    let mut hevc = bytes.clone();
    for at in 0..hevc.len() - 4 {
        if &hevc[at..at + 4] == b"avc1" {
            hevc[at..at + 4].copy_from_slice(b"hvc1");
        }
    }
    std::fs::write(dir.join("hevc.mp4"), &hevc).unwrap();
    let file = VideoFile::open(dir.join("hevc.mp4")).unwrap();
    assert_eq!(file.codec(), Codec::Hevc);
    let err = file.decode_rgb(&[0]).unwrap_err().to_string();
    assert!(err.contains("hevc.mp4") && err.contains("frame 0"), "{err}");
    // On NVDEC the avcC record read as hvcC is an error too.
    if let Some(err) = nvdec_error(&file, &[0]) {
        assert!(matches!(err, Error::Nvdec { .. } | Error::Decode { .. }), "{err:?}");
        assert!(err.to_string().contains("hevc.mp4"), "{err}");
    }
    // Every sample's bytes overwritten: an error naming the frame, never a panic.
    let path = video("h264", "front");
    let track = robocache_video::mp4::read_track(&path, &bytes[..]).unwrap();
    let mut corrupt = bytes.clone();
    for sample in &track.samples {
        // The size fields stay; every NAL unit's bytes become 0xff.
        let start = sample.offset as usize + 4;
        corrupt[start..sample.offset as usize + sample.size as usize].fill(0xff);
    }
    let file = VideoFile::open(&path).unwrap();
    std::fs::write(dir.join("corrupt.mp4"), &corrupt).unwrap();
    let broken = VideoFile::open(dir.join("corrupt.mp4")).unwrap();
    assert_eq!(broken.frames(), file.frames());
    let err = broken.decode_rgb(&[5]).unwrap_err().to_string();
    assert!(err.contains("corrupt.mp4") && err.contains("frame"), "{err}");
    // NVDEC: an error naming the file and the frame, never a hang.
    for _ in 0..2 {
        if let Some(err) = nvdec_error(&broken, &[5, 0]) {
            assert!(matches!(err, Error::Nvdec { .. } | Error::Decode { .. }), "{err:?}");
            assert!(err.to_string().contains("corrupt.mp4"), "{err}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
