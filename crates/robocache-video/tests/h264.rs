//! H.264 and HEVC decoded against FFmpeg's decoder (PyAV), frame for
//! frame, on streams written by libx264 and libx265
//! (`tests/fixtures/make_h264_fixtures.py`): High profile with B-frames in
//! a pyramid (frames leave the decoder in another order than they enter),
//! Baseline with a cropped size, and HEVC with B-frames and a cropped size,
//! in closed and in open groups of pictures (leading pictures shown before
//! their CRA key frame, decoded from the key frame before).
//!
//! Each check runs on the CPU (OpenH264, libde265) and on NVDEC (GPU 0). The NVDEC
//! instances skip, saying so, only where the machine has no NVDEC at all
//! (no NVIDIA driver: CI), and not even there under
//! `ROBOCACHE_REQUIRE_CUDA=1` (the GPU bundle's run.sh sets it); an NVDEC
//! that is there and refuses or fails a file fails them.

use std::path::PathBuf;

use robocache_video::{AnnexBDecoder, Codec, CodecError, DecoderChoice, Error, NalConfig, VideoFile};

const NVDEC: DecoderChoice = DecoderChoice::Nvdec { device: 0 };

/// Held by every test that uses GPU 0's NVDEC sessions: the tests of the
/// session limit and of idle sessions count the GPU's sessions, which a
/// test beside them would change.
static NVDEC_IN_USE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// GPU 0's NVDEC for this test alone (where `choice` may use it).
fn nvdec_alone(choice: DecoderChoice) -> Option<std::sync::MutexGuard<'static, ()>> {
    (choice != DecoderChoice::Cpu).then(|| NVDEC_IN_USE.lock().unwrap_or_else(|p| p.into_inner()))
}

fn fixture(name: &str) -> (VideoFile, Vec<Vec<u8>>) {
    // Where the crate was built, or the working directory (the GPU bundle
    // runs its test binaries from a copy of the checkout elsewhere).
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = if built.is_dir() { built } else { PathBuf::from(".") }.join("tests/fixtures");
    let file = VideoFile::open(dir.join(format!("{name}.mp4"))).unwrap();
    let mut archive = npyz::npz::NpzArchive::open(dir.join(format!("{name}.npz"))).unwrap();
    let npy = archive.by_name("yuv").unwrap().expect("the npz holds `yuv`");
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let bytes: Vec<u8> = npy.into_vec().unwrap();
    let frames = bytes.chunks(shape[1]).map(<[u8]>::to_vec).collect();
    (file, frames)
}

/// Whether `choice` can run here: NVDEC missing skips its instance, unless
/// the GPU bundle requires it.
#[allow(clippy::print_stderr)] // the reason a check did not run, in the test's output
fn runs_here(file: &VideoFile, choice: DecoderChoice) -> bool {
    match file.decode_yuv_on(&[0], choice) {
        // Only a machine without NVDEC skips: NVDEC that is there and
        // refuses or fails the file fails the check below.
        Err(Error::NvdecUnavailable { source: reason, .. }) => {
            let required = std::env::var("ROBOCACHE_REQUIRE_CUDA").is_ok_and(|v| v == "1");
            assert!(!required, "ROBOCACHE_REQUIRE_CUDA=1 but NVDEC is not available: {reason}");
            eprintln!("NVDEC not available, not checked: {reason}");
            false
        }
        _ => true,
    }
}

fn check(name: &str, codec: Codec, width: usize, height: usize, frames: usize, choice: DecoderChoice) {
    let _alone = nvdec_alone(choice);
    let (file, ffmpeg) = fixture(name);
    assert_eq!((file.codec(), file.width(), file.height(), file.frames()), (codec, width, height, frames));
    assert_eq!(ffmpeg.len(), frames);
    if !runs_here(&file, choice) {
        return;
    }
    let decode_yuv = |indices: &[usize]| file.decode_yuv_on(indices, choice);
    let all: Vec<usize> = (0..frames).collect();
    let decoded = decode_yuv(&all).unwrap();
    for (index, frame) in decoded.iter().enumerate() {
        assert_eq!((frame.width, frame.height), (width, height));
        assert_eq!(frame.data, ffmpeg[index], "{name}: frame {index} of one pass");
    }
    // Each frame on its own, last first: every group of pictures decoded
    // again from its key frame, B-frames included.
    for index in all.iter().copied().rev() {
        assert_eq!(decode_yuv(&[index]).unwrap()[0].data, ffmpeg[index], "{name}: frame {index} alone");
    }
    // Scattered frames of several groups, repeated, out of order.
    let picks = [frames - 1, 1, 2, 2, frames / 2, 0, frames / 3 + 1];
    for (frame, &index) in decode_yuv(&picks).unwrap().iter().zip(&picks) {
        assert_eq!(frame.data, ffmpeg[index], "{name}: frame {index} among others");
    }
}

macro_rules! on_cpu_and_nvdec {
    ($($name:ident: $fixture:literal, $codec:expr, $width:literal x $height:literal, $frames:literal;)*) => {
        mod cpu {
            use super::*;
            $(#[test]
            fn $name() {
                check($fixture, $codec, $width, $height, $frames, DecoderChoice::Cpu);
            })*
        }
        mod nvdec {
            use super::*;
            $(#[test]
            fn $name() {
                check($fixture, $codec, $width, $height, $frames, NVDEC);
            })*
        }
    };
}

on_cpu_and_nvdec! {
    high_profile_b_frames_equal_ffmpeg: "high_bframes", Codec::H264, 64 x 48, 40;
    baseline_cropped_frames_equal_ffmpeg: "baseline_cropped", Codec::H264, 50 x 30, 20;
    hevc_b_frames_cropped_equal_ffmpeg: "hevc_bframes", Codec::Hevc, 176 x 150, 24;
    hevc_open_gop_leading_pictures_equal_ffmpeg: "hevc_open_gop", Codec::Hevc, 176 x 150, 36;
}

/// Each fixture's samples as a ROS 2 `CompressedVideo` topic carries them
/// (Annex B access units, parameter sets before each key frame), decoded by
/// [`AnnexBDecoder`] on `choice`: every picture equals FFmpeg's, B-frames
/// and leading pictures included. The NVDEC instance skips, saying so,
/// only where the machine has no NVDEC (CI).
#[allow(clippy::print_stderr)] // the reason a check did not run, in the test's output
fn annex_b_check(name: &str, choice: DecoderChoice) {
    let _alone = nvdec_alone(choice);
    let (file, ffmpeg) = fixture(name);
    let bytes = std::fs::read(file.path()).unwrap();
    let track = robocache_video::mp4::read_track(file.path(), &bytes[..]).unwrap();
    let config = match track.codec {
        Codec::H264 => NalConfig::from_avcc(&track.config).unwrap(),
        _ => NalConfig::from_hvcc(&track.config).unwrap(),
    };
    let mut decoder = match AnnexBDecoder::with_choice(track.codec, file.width(), file.height(), choice) {
        Err(CodecError::Unavailable(reason)) => {
            let required = std::env::var("ROBOCACHE_REQUIRE_CUDA").is_ok_and(|v| v == "1");
            assert!(!required, "ROBOCACHE_REQUIRE_CUDA=1 but NVDEC is not available: {reason}");
            eprintln!("NVDEC not available, not checked: {reason}");
            return;
        }
        decoder => decoder.unwrap(),
    };
    assert_eq!(decoder.is_nvdec(), matches!(choice, DecoderChoice::Nvdec { .. }));
    let mut pictures = Vec::new();
    for (tag, sample) in track.samples.iter().enumerate() {
        let data = &bytes[sample.offset as usize..(sample.offset + u64::from(sample.size)) as usize];
        let mut unit = Vec::new();
        if sample.sync {
            unit.extend_from_slice(config.parameter_sets());
        }
        config.append_annex_b(data, &mut unit).unwrap();
        pictures.extend(decoder.decode(tag, &unit).unwrap());
    }
    pictures.extend(decoder.finish().unwrap());
    decoder.close();
    let order = track.presentation_order();
    assert_eq!(pictures.len(), ffmpeg.len(), "{name}: one picture a unit");
    for (tag, picture) in pictures {
        let shown = order.iter().position(|&t| t == tag).unwrap();
        assert_eq!(picture.data, ffmpeg[shown], "{name}: the picture of unit {tag} ({choice:?})");
    }
}

macro_rules! annex_b_on_cpu_and_nvdec {
    ($($name:ident: $fixture:literal;)*) => {
        mod annex_b_cpu {
            $(#[test]
            fn $name() {
                super::annex_b_check($fixture, super::DecoderChoice::Cpu);
            })*
        }
        mod annex_b_nvdec {
            $(#[test]
            fn $name() {
                super::annex_b_check($fixture, super::NVDEC);
            })*
        }
    };
}

annex_b_on_cpu_and_nvdec! {
    high_profile_b_frames_as_annex_b_equal_ffmpeg: "high_bframes";
    baseline_cropped_as_annex_b_equal_ffmpeg: "baseline_cropped";
    hevc_b_frames_as_annex_b_equal_ffmpeg: "hevc_bframes";
    hevc_open_gop_as_annex_b_equal_ffmpeg: "hevc_open_gop";
}

/// The HEVC fixture with every sample's bytes after `keep` of each NAL
/// unit replaced by `fill(at)`, written beside the test's other files.
fn corrupt_hevc(name: &str, keep: usize, fill: impl Fn(usize) -> u8) -> VideoFile {
    let (file, _) = fixture("hevc_bframes");
    let mut bytes = std::fs::read(file.path()).unwrap();
    let track = robocache_video::mp4::read_track(file.path(), &bytes[..]).unwrap();
    for sample in &track.samples {
        let (mut at, end) = (sample.offset as usize, sample.offset as usize + sample.size as usize);
        while at + 4 <= end {
            let size = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            let unit = at + 4..(at + 4 + size).min(end);
            for i in unit.start + keep.min(size)..unit.end {
                bytes[i] = fill(i);
            }
            at = unit.end;
        }
    }
    let dir = std::env::temp_dir().join(format!("robocache-video-hevc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.mp4"));
    std::fs::write(&path, &bytes).unwrap();
    VideoFile::open(&path).unwrap()
}

#[test]
fn corrupt_hevc_is_an_error_naming_the_file_and_frame() {
    // Slice data replaced (NAL headers kept), by noise or by ones: libde265
    // warns, and the sample fails; a whole unit of ones is no NAL unit
    // libde265 reads, and no frame comes out.
    let noise = |i: usize| (i.wrapping_mul(2654435761) >> 13) as u8;
    for (name, keep, fill) in
        [("noise", 3, &noise as &dyn Fn(usize) -> u8), ("ones", 3, &|_| 0xff), ("units", 0, &|_| 0xff)]
    {
        let file = corrupt_hevc(name, keep, fill);
        for picks in [vec![5], vec![0, 23, 11]] {
            let err = file.decode_yuv(&picks).unwrap_err().to_string();
            assert!(err.contains(&format!("{name}.mp4")) && err.contains("frame"), "{name}: {err}");
        }
    }
}

#[test]
fn auto_decodes_everywhere_with_the_same_frames() {
    let _alone = nvdec_alone(NVDEC);
    // NVDEC where it is, the CPU otherwise: the frames are the same.
    let (file, ffmpeg) = fixture("high_bframes");
    let picks = [39, 0, 13, 13, 26];
    let frames = file.decode_yuv_on(&picks, DecoderChoice::auto(0)).unwrap();
    for (frame, &index) in frames.iter().zip(&picks) {
        assert_eq!(frame.data, ffmpeg[index], "frame {index}");
    }
}

#[test]
fn auto_keeps_to_its_limit_on_nvdec_sessions() {
    let _alone = nvdec_alone(NVDEC);
    // No session allowed: every sample decodes on the CPU, even where NVDEC is.
    let (file, ffmpeg) = fixture("high_bframes");
    let picks = [39, 0, 13];
    let cpu_only = DecoderChoice::Auto { device: 0, nvdec_sessions: 0 };
    let (frames, counts) = file.decode_yuv_counted(&picks, cpu_only).unwrap();
    assert_eq!(counts.nvdec_samples, 0);
    assert!(counts.cpu_samples >= picks.len() as u64, "{counts:?}");
    for (frame, &index) in frames.iter().zip(&picks) {
        assert_eq!(frame.data, ffmpeg[index], "frame {index}");
    }
    // One session allowed, one request at a time: NVDEC decodes it where it can.
    if runs_here(&file, NVDEC) {
        let one = DecoderChoice::Auto { device: 0, nvdec_sessions: 1 };
        let (frames, counts) = file.decode_yuv_counted(&picks, one).unwrap();
        assert_eq!(counts.cpu_samples, 0, "{counts:?}");
        assert!(counts.nvdec_samples >= picks.len() as u64, "{counts:?}");
        for (frame, &index) in frames.iter().zip(&picks) {
            assert_eq!(frame.data, ffmpeg[index], "frame {index}");
        }
    }
}

#[test]
fn idle_nvdec_sessions_are_released() {
    let _alone = nvdec_alone(NVDEC);
    let (file, ffmpeg) = fixture("high_bframes");
    if !runs_here(&file, NVDEC) {
        return;
    }
    let frames = file.decode_yuv_on(&[3], NVDEC).unwrap();
    assert_eq!(frames[0].data, ffmpeg[3]);
    assert!(robocache_video::idle_nvdec_sessions(0) >= 1, "a finished request gives its session back");
    // Not yet idle long enough.
    let long = robocache_video::NVDEC_IDLE_SESSION_RELEASE * 100;
    assert_eq!(robocache_video::release_idle_nvdec_sessions(0, long), 0);
    // The releasing thread frees them once idle past the limit.
    let deadline = std::time::Instant::now() + robocache_video::NVDEC_IDLE_SESSION_RELEASE * 3;
    while robocache_video::idle_nvdec_sessions(0) > 0 {
        assert!(std::time::Instant::now() < deadline, "idle NVDEC sessions were not released");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // A released pool makes sessions again.
    let frames = file.decode_yuv_on(&[3], NVDEC).unwrap();
    assert_eq!(frames[0].data, ffmpeg[3]);
}
