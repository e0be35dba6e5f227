//! Fuzzing the MP4 demuxer, the NAL unit parsing and the decoders behind
//! them with mutated copies of the committed fixtures (AV1, H.264 and HEVC
//! files written by FFmpeg): whatever the bytes, an answer within the
//! deadline, an error that names the file, never a panic or a hang.
//! `PROPTEST_CASES` sets how many (CI runs thousands in release,
//! `.ci/run`); failures are kept in `proptest-regressions/fuzz.txt`.

mod support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use support::crate_dir;

use robocache_video::testing::{apply, mutations, within_deadline, Mutation};
use robocache_video::{mp4, Codec, NalConfig, VideoFile};

/// The seeds: every committed MP4 of this crate and of the LeRobot fixtures.
fn seeds() -> &'static [(String, Vec<u8>)] {
    static SEEDS: OnceLock<Vec<(String, Vec<u8>)>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let lerobot = crate_dir().join("../robocache-datasets/tests/fixtures/lerobot");
        let mut paths: Vec<PathBuf> = std::fs::read_dir(crate_dir().join("tests/fixtures"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "mp4"))
            .collect();
        for root in ["av1", "h264", "hevc"] {
            paths.push(lerobot.join(root).join("videos/observation.images.front/chunk-000/file-000.mp4"));
        }
        paths.sort();
        paths
            .into_iter()
            .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
            .collect()
    })
}

/// The demuxer on mutated bytes in memory, then, where it reads a track,
/// the NAL configuration and samples.
fn demux(name: &str, bytes: Vec<u8>) {
    let path = PathBuf::from(name);
    let what = format!("demuxing {name}");
    let name = name.to_owned();
    within_deadline(&what, move || {
        let track = match mp4::read_track(&path, &bytes[..]) {
            Ok(track) => track,
            Err(error) => {
                assert!(error.to_string().contains(&name), "the error does not name the file: {error}");
                return;
            }
        };
        let config = match track.codec {
            Codec::H264 => NalConfig::from_avcc(&track.config),
            Codec::Hevc => NalConfig::from_hvcc(&track.config),
            Codec::Av1 => return,
        };
        let Ok(config) = config else { return };
        let mut out = Vec::new();
        for sample in track.samples.iter().take(64) {
            if let Ok(bytes) = mp4::read_sample(&path, &bytes[..], sample) {
                out.clear();
                let _ = config.to_annex_b(&bytes, &mut out);
            }
        }
    });
}

/// The whole path: a mutated file on disk opened and decoded on the CPU
/// (the decoders get the damaged samples too).
fn decode(dir: &Path, name: &str, bytes: Vec<u8>) {
    let path = dir.join(name);
    std::fs::write(&path, &bytes).unwrap();
    let what = format!("decoding {name}");
    let name = name.to_owned();
    within_deadline(&what, move || {
        let Ok(video) = VideoFile::open(&path) else { return };
        let last = video.frames() - 1;
        if let Err(error) = video.decode_yuv(&[0, last / 2, last]) {
            assert!(error.to_string().contains(&name), "the error does not name the file: {error}");
        }
    });
}

/// Where proptest keeps the failures it found (committed: each stays a regression case).
const REGRESSIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/proptest-regressions/fuzz.txt");

fn case(seed: usize, edits: &[Mutation]) -> (String, Vec<u8>) {
    let (name, bytes) = &seeds()[seed % seeds().len()];
    let mut bytes = bytes.clone();
    apply(&mut bytes, edits);
    (name.clone(), bytes)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(REGRESSIONS))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_demuxer_and_nal_parsing_answer_any_bytes(seed in any::<usize>(), edits in mutations(4)) {
        let (name, bytes) = case(seed, &edits);
        demux(&name, bytes);
    }

    #[test]
    fn decoding_damaged_files_is_an_error_never_a_crash(seed in any::<usize>(), edits in mutations(3)) {
        let (name, bytes) = case(seed, &edits);
        let dir = tempfile::tempdir().unwrap();
        decode(dir.path(), &name, bytes);
    }

    #[test]
    fn nal_configuration_records_answer_any_bytes(record in prop::collection::vec(any::<u8>(), 0..96), sample in prop::collection::vec(any::<u8>(), 0..96)) {
        for config in [NalConfig::from_avcc(&record), NalConfig::from_hvcc(&record)].into_iter().flatten() {
            let _ = config.to_annex_b(&sample, &mut Vec::new());
        }
    }
}

/// The first crash the harness found: one flipped bit in the AV1 data of
/// LeRobot's front camera made rav1d panic inside its `extern "C"` API,
/// which aborted the process (memorysafety/rav1d#1497). Now an error.
#[test]
fn a_flipped_bit_in_av1_data_is_an_error_not_an_abort() {
    let av1 = seeds().iter().find(|(name, bytes)| name == "file-000.mp4" && bytes.len() == 18308);
    let (name, bytes) = av1.expect("the LeRobot AV1 front camera is a seed");
    let mut bytes = bytes.clone();
    apply(&mut bytes, &[Mutation::FlipBit { at: 9222, bit: 4 }]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, &bytes).unwrap();
    let video = VideoFile::open(&path).unwrap();
    let last = video.frames() - 1;
    let error = video.decode_yuv(&[0, last / 2, last]).unwrap_err().to_string();
    assert!(error.contains("file-000.mp4") && error.contains("corrupt AV1 data"), "{error}");
}
