//! RGB frames encoded by [`H264Encoder`] and written by [`Mp4Writer`]
//! read back through robocache's own demuxer and decoders: the file's
//! size, frame count, times and key frames are the ones written, every
//! frame is within a tolerance of its source, and a read from the middle of
//! a group decodes the same pixels as the whole stream (so the key frames
//! in `stss` are where the encoder put them). On NVDEC (GPU 0) the file
//! decodes to the same planes as on the CPU; that instance skips, saying
//! so, only where the machine has no NVDEC (CI).

use robocache_video::{Codec, DecoderChoice, Error, H264Encoder, Mp4Writer, VideoFile, Yuv420};

/// A moving scene: two gradients and a square that crosses the frame.
fn scene(width: usize, height: usize, frames: usize) -> Vec<Vec<u8>> {
    (0..frames)
        .map(|t| {
            let mut rgb = vec![0u8; width * height * 3];
            for y in 0..height {
                for x in 0..width {
                    let p = &mut rgb[3 * (y * width + x)..3 * (y * width + x) + 3];
                    let inside = (x + 64 - (3 * t) % 64) % width < 12 && (y + t) % height < 12;
                    p[0] = (40 + 2 * x + t) as u8;
                    p[1] = (30 + 4 * y) as u8;
                    p[2] = if inside { 230 } else { (200 - 2 * x - y) as u8 };
                }
            }
            rgb
        })
        .collect()
}

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    let mse = a.iter().zip(b).map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2)).sum::<f64>() / a.len() as f64;
    10.0 * (255.0f64 * 255.0 / mse.max(1e-12)).log10()
}

/// Encodes `frames` into `path` at 30 fps (time scale 30,000), a key frame every `gop`.
fn write(path: &std::path::Path, frames: &[Vec<u8>], width: usize, height: usize, gop: u32) -> Vec<bool> {
    let mut encoder = H264Encoder::new(width, height, 30.0, gop).unwrap();
    let mut writer: Option<Mp4Writer> = None;
    let mut keys = Vec::new();
    for frame in frames {
        let encoded = encoder.encode_rgb(frame).unwrap();
        if writer.is_none() {
            assert!(encoded.key && encoded.sps.len() == 1 && encoded.pps.len() == 1, "the first frame is an IDR");
            writer =
                Some(Mp4Writer::create_h264(path, width, height, 30_000, &encoded.sps[0], &encoded.pps[0]).unwrap());
        }
        keys.push(encoded.key);
        writer.as_mut().unwrap().push(&encoded.sample, 1000, encoded.key).unwrap();
    }
    writer.unwrap().finish().unwrap();
    keys
}

#[test]
fn encoded_frames_read_back_within_tolerance_with_their_times_and_key_frames() {
    let (width, height, count) = (64, 48, 40);
    let source = scene(width, height, count);
    let dir = tempfile::tempdir().unwrap();
    for gop in [2u32, 8] {
        let path = dir.path().join(format!("gop{gop}/file-000.mp4"));
        let keys = write(&path, &source, width, height, gop);
        let expected_keys: Vec<bool> = (0..count).map(|k| k % gop as usize == 0).collect();
        assert_eq!(keys, expected_keys, "an IDR every {gop} frames");

        let video = VideoFile::open(&path).unwrap();
        assert_eq!((video.codec(), video.width(), video.height(), video.frames()), (Codec::H264, 64, 48, count));
        assert!((video.average_fps() - 30.0).abs() < 1e-9, "{}", video.average_fps());
        for k in [0, 1, 17, count - 1] {
            assert!((video.frame_time(k).unwrap() - k as f64 / 30.0).abs() < 1e-9);
            assert_eq!(video.frame_at(k as f64 / 30.0).unwrap(), k);
        }
        let all: Vec<usize> = (0..count).collect();
        let decoded = video.decode_rgb(&all).unwrap();
        for (k, (frame, original)) in decoded.iter().zip(&source).enumerate() {
            // The codec's loss (against the source as the encoder was
            // given it, 4:2:0) and the whole loss, which is mostly the
            // chroma of the square's sharp edges at half resolution.
            let converted = Yuv420::from_rgb(width, height, original).unwrap().to_rgb();
            let (codec, whole) = (psnr(frame, &converted), psnr(frame, original));
            assert!(codec > 36.0 && whole > 28.0, "gop {gop}, frame {k}: PSNR {codec:.1} dB, {whole:.1} dB");
        }
        // Mid-group reads decode from the key frame before them.
        for indices in [vec![5], vec![13, 14], vec![count - 1]] {
            let some = video.decode_rgb(&indices).unwrap();
            for (frame, &k) in some.iter().zip(&indices) {
                assert_eq!(frame, &decoded[k], "gop {gop}: frame {k} read alone");
            }
        }
    }
}

#[test]
#[allow(clippy::print_stderr)] // the reason a check did not run, in the test's output
fn a_written_file_decodes_on_nvdec_to_the_cpu_planes() {
    let (width, height, count) = (64, 48, 12);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("file-000.mp4");
    write(&path, &scene(width, height, count), width, height, 4);
    let video = VideoFile::open(&path).unwrap();
    let all: Vec<usize> = (0..count).collect();
    match video.decode_yuv_on(&all, DecoderChoice::Nvdec { device: 0 }) {
        Err(Error::NvdecUnavailable { source, .. }) => {
            let required = std::env::var("ROBOCACHE_REQUIRE_CUDA").is_ok_and(|v| v == "1");
            assert!(!required, "ROBOCACHE_REQUIRE_CUDA=1 but NVDEC is not available: {source}");
            eprintln!("NVDEC not available, not checked: {source}");
        }
        gpu => assert_eq!(gpu.unwrap(), video.decode_yuv(&all).unwrap()),
    }
}

#[test]
fn a_track_must_start_at_a_key_frame_and_hold_frames() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.mp4");
    let sps = [0x67, 66, 0xc0, 30, 1];
    let mut writer = Mp4Writer::create_h264(&path, 64, 48, 30_000, &sps, &[0x68, 1]).unwrap();
    let error = writer.push(&[0, 0, 0, 1, 0x41], 1000, false).unwrap_err().to_string();
    assert!(error.contains("bad.mp4") && error.contains("key frame"), "{error}");
    let error = writer.finish().unwrap_err().to_string();
    assert!(error.contains("no frames"), "{error}");
    assert!(Mp4Writer::create_h264(&path, 70_000, 48, 30_000, &sps, &[0x68]).is_err());
}
