//! LeRobot roots written by LeRobot 0.6.1 itself (`fixtures/make_lerobot_fixtures.py`,
//! committed under `fixtures/lerobot/`) read natively: every sample's
//! `delta_timestamps` window equals what `LeRobotDataset.__getitem__`
//! returned, bit for bit, pad masks, LeRobot's own columns and task texts
//! included.

use std::path::PathBuf;

use robocache_cpu::{DType, HostVec};
use robocache_datasets::testing::copy_tree;
use robocache_datasets::{Dataset, DeltaTimestamps, DeltaWindows, FeatureStorage, Format, FrameFormat};
use serde_json::Value;

type Archive = npyz::npz::NpzArchive<std::io::BufReader<std::fs::File>>;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lerobot")
}

fn expected(name: &str) -> (Archive, Value) {
    let dir = fixtures().join("expected");
    let archive = npyz::npz::NpzArchive::open(dir.join(format!("{name}.npz"))).unwrap();
    let json = serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap()).unwrap();
    (archive, json)
}

fn npz(archive: &mut Archive, name: &str) -> (HostVec, Vec<usize>) {
    let npy = archive.by_name(name).unwrap().unwrap_or_else(|| panic!("LeRobot's dump has no {name}"));
    let array = robocache_datasets::npy::read_array(npy, u64::MAX).unwrap();
    (array.data, array.shape)
}

/// The bytes LeRobot's value has in robocache's dtype: LeRobot returns
/// float64 features as float32 (`torch.tensor` of Python floats); robocache
/// keeps float64, which rounds to LeRobot's value.
fn as_lerobot(data: HostVec) -> HostVec {
    match data {
        HostVec::F64(v) => HostVec::F32(v.into_iter().map(|x| x as f32).collect()),
        other => other,
    }
}

fn deltas(json: &Value) -> DeltaTimestamps {
    let deltas = json["deltas"].as_object().unwrap();
    DeltaTimestamps::new(
        deltas
            .iter()
            .map(|(k, v)| (k.clone(), v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()))
            .collect(),
    )
}

fn read_rows(dataset: &Dataset, episode: usize, stream: &str, rows: &[usize]) -> HostVec {
    let mut parts = Vec::new();
    let dtype = dataset.stream(episode, stream).unwrap().1.dtype;
    for &row in rows {
        parts.push(dataset.read_rows(episode, stream, row..row + 1).unwrap());
    }
    let bytes: Vec<u8> = parts.iter().flat_map(|p| p.as_slice().as_bytes().to_vec()).collect();
    host_from_bytes(dtype, &bytes)
}

fn host_from_bytes(dtype: DType, bytes: &[u8]) -> HostVec {
    if dtype == DType::Bool {
        return HostVec::Bool(bytes.iter().map(|&b| b != 0).collect());
    }
    let mut out = HostVec::zeros(dtype, bytes.len() / dtype.size_in_bytes());
    out.as_bytes_mut().unwrap().copy_from_slice(bytes);
    out
}

/// `[C, H, W]` frames of LeRobot's dump as `[H, W, C]`.
fn hwc(chw: &[u8], c: usize, h: usize, w: usize) -> Vec<u8> {
    let mut out = vec![0; chw.len()];
    for ch in 0..c {
        for y in 0..h {
            for x in 0..w {
                out[(y * w + x) * c + ch] = chw[(ch * h + y) * w + x];
            }
        }
    }
    out
}

fn check_against_lerobot(root: &str, answers: &str) {
    let dataset = Dataset::open(fixtures().join(root)).unwrap();
    assert_eq!(dataset.format(), Format::LeRobot);
    let lerobot = dataset.lerobot().unwrap();
    assert_eq!(lerobot.fps(), 10.0);
    assert_eq!(dataset.len(), 5);
    assert_eq!(dataset.info().episodes.iter().map(|e| e.len).collect::<Vec<_>>(), [13, 21, 6, 25, 11]);
    let (mut archive, json) = expected(answers);
    let spec = deltas(&json);
    let windows = DeltaWindows::new(dataset.info(), &spec).unwrap();
    assert_eq!(windows.len(), json["len"].as_u64().unwrap() as usize);
    let tasks = json["tasks"].as_array().unwrap();
    let mut frames_checked = 0;
    for sample in 0..windows.len() {
        let window = windows.window(sample).unwrap();
        for (i, (key, _)) in spec.deltas.iter().enumerate() {
            let offsets = windows.offsets(i);
            let rows: Vec<(usize, bool)> = offsets.iter().map(|&d| window.row(d)).collect();
            let (pad, _) = npz(&mut archive, &format!("{sample}/{key}_is_pad"));
            assert_eq!(pad, HostVec::Bool(rows.iter().map(|r| r.1).collect()), "{root} sample {sample}: {key}_is_pad");
            let picked: Vec<usize> = rows.iter().map(|r| r.0).collect();
            match lerobot.storage(key).unwrap() {
                FeatureStorage::Values => {
                    let (theirs, _) = npz(&mut archive, &format!("{sample}/{key}"));
                    let mut out =
                        vec![0u8; offsets.len() * dataset.stream(window.episode, key).unwrap().1.step_bytes()];
                    let pads = dataset.read_delta_window_into(&window, key, offsets, &mut out).unwrap();
                    assert_eq!(pads, rows.iter().map(|r| r.1).collect::<Vec<_>>());
                    let ours = host_from_bytes(dataset.stream(0, key).unwrap().1.dtype, &out);
                    assert_eq!(as_lerobot(ours), theirs, "{root} sample {sample}: {key}");
                }
                FeatureStorage::Image => {
                    let (ids, _) = npz(&mut archive, &format!("{sample}/{key}"));
                    let (table, shape) = npz(&mut archive, &format!("frames/{key}"));
                    let (c, h, w) = (shape[1], shape[2], shape[3]);
                    let HostVec::U8(table) = table else { panic!("frames are u8") };
                    let ours = read_rows(&dataset, window.episode, key, &picked);
                    let HostVec::I64(ids) = ids else { panic!("ids are i64") };
                    for (t, id) in ids.iter().enumerate() {
                        let frame = &table[*id as usize * c * h * w..(*id as usize + 1) * c * h * w];
                        let theirs = hwc(frame, c, h, w);
                        assert_eq!(
                            &ours.as_slice().as_bytes()[t * c * h * w..(t + 1) * c * h * w],
                            theirs.as_slice(),
                            "{root} sample {sample}: {key} frame {t}"
                        );
                        frames_checked += 1;
                    }
                }
                FeatureStorage::Video => {
                    // Frames as LeRobot decoded them (dav1d or FFmpeg's
                    // H.264 or HEVC decoder, then swscale's conversion):
                    // robocache's (rav1d, OpenH264, libde265) equal them bit
                    // for bit.
                    let (ids, _) = npz(&mut archive, &format!("{sample}/{key}"));
                    let (table, shape) = npz(&mut archive, &format!("frames/{key}"));
                    let (c, h, w) = (shape[1], shape[2], shape[3]);
                    let HostVec::U8(table) = table else { panic!("frames are u8") };
                    let HostVec::I64(ids) = ids else { panic!("ids are i64") };
                    let mut out = vec![0u8; offsets.len() * h * w * c];
                    dataset.read_delta_window_into(&window, key, offsets, &mut out).unwrap();
                    for (t, id) in ids.iter().enumerate() {
                        let theirs = hwc(&table[*id as usize * c * h * w..(*id as usize + 1) * c * h * w], c, h, w);
                        assert_eq!(
                            &out[t * c * h * w..(t + 1) * c * h * w],
                            theirs.as_slice(),
                            "{root} sample {sample}: {key} frame {t}"
                        );
                        frames_checked += 1;
                    }
                }
            }
        }
        // Features without offsets: the sample's own frame.
        for key in [
            "observation.effort",
            "observation.counter",
            "timestamp",
            "frame_index",
            "episode_index",
            "index",
            "task_index",
        ] {
            let (theirs, _) = npz(&mut archive, &format!("{sample}/{key}"));
            let ours = as_lerobot(read_rows(&dataset, window.episode, key, &[window.frame]));
            assert_eq!(ours, theirs, "{root} sample {sample}: {key}");
        }
        let task_index = read_rows(&dataset, window.episode, "task_index", &[window.frame]);
        let HostVec::I64(task_index) = task_index else { panic!("task_index is i64") };
        assert_eq!(
            lerobot.tasks()[task_index[0] as usize],
            tasks[sample].as_str().unwrap(),
            "{root} sample {sample}: task"
        );
        // LeRobot's dataset index is robocache's sample number.
        assert_eq!(lerobot.first_index(window.episode) + window.frame, sample);
    }
    assert!(frames_checked > 0);
}

#[test]
fn lerobot_v30_av1_root_windows_equal_lerobot() {
    check_against_lerobot("av1", "av1");
}

#[test]
fn lerobot_v30_h264_root_windows_equal_lerobot() {
    check_against_lerobot("h264", "h264");
}

/// HEVC (libde265 on the CPU) with x265's open groups of pictures: a
/// leading picture decodes from the key frame before its own. LeRobot's
/// answers here are its `pyav` backend's (its torchcodec one fails on
/// this root).
#[test]
fn lerobot_v30_hevc_root_windows_equal_lerobot() {
    check_against_lerobot("hevc", "hevc");
}

#[test]
fn lerobot_v30_image_features_equal_lerobot_bit_for_bit() {
    check_against_lerobot("images", "images");
}

#[test]
fn lerobot_v21_root_answers_as_the_v30_root_it_was_written_from() {
    let dataset = Dataset::open(fixtures().join("v21")).unwrap();
    assert_eq!(dataset.lerobot().unwrap().codebase_version(), "v2.1");
    check_against_lerobot("v21", "images");
}

#[test]
fn lerobot_metadata_lists_tasks_streams_and_video_spans() {
    let dataset = Dataset::open(fixtures().join("av1")).unwrap();
    let info = dataset.info();
    assert_eq!(info.metadata["tasks"], serde_json::json!(["pick the red cube", "open the drawer", "push the button"]));
    let first = &info.episodes[0];
    let state = first.stream("observation.state").unwrap();
    assert_eq!((state.dtype, state.step_shape.as_slice()), (DType::F32, &[6usize][..]));
    let camera = first.stream("observation.images.front").unwrap();
    assert_eq!(
        (camera.dtype, camera.step_shape.as_slice(), camera.is_image()),
        (DType::U8, &[32usize, 48, 3][..], true)
    );
    assert_eq!(info.episodes[4].metadata["videos/observation.images.front"]["from_timestamp"], serde_json::json!(6.5));
    // Explicit times from the `timestamp` column.
    let times = dataset.times(1, "action").unwrap();
    assert_eq!(times.len(), 21);
    assert_eq!(times.time(3), 0.3f32 as f64);
}

/// Reads every camera frame and every low-dimensional row of every
/// episode; the first error, as text.
fn read_everything(root: &std::path::Path) -> Result<(), String> {
    let dataset = Dataset::open(root).map_err(|e| e.to_string())?;
    for (e, episode) in dataset.info().episodes.iter().enumerate() {
        for stream in &episode.streams {
            dataset.read_rows(e, &stream.name, 0..episode.len).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

#[test]
fn broken_lerobot_roots_are_clear_errors() {
    let scratch = tempfile::tempdir().unwrap();
    let fresh = |name: &str| {
        let root = scratch.path().join(name);
        copy_tree(&fixtures().join("av1"), &root).unwrap();
        root
    };
    let front = "videos/observation.images.front/chunk-000/file-000.mp4";

    let root = fresh("truncated_video");
    let bytes = std::fs::read(root.join(front)).unwrap();
    std::fs::write(root.join(front), &bytes[..bytes.len() / 2]).unwrap();
    let err = read_everything(&root).unwrap_err();
    assert!(
        err.contains("file-000.mp4") && err.contains("observation.images.front") && err.contains("truncated"),
        "{err}"
    );

    let root = fresh("missing_video");
    std::fs::remove_file(root.join(front)).unwrap();
    let err = read_everything(&root).unwrap_err();
    assert!(err.contains("file-000.mp4") && err.contains("episode_0"), "{err}");

    // Junk in the middle of the coded frames: an error or frames, never a panic.
    let root = fresh("corrupt_frames");
    let mut bytes = std::fs::read(root.join(front)).unwrap();
    let n = bytes.len();
    for b in &mut bytes[n / 3..n / 3 + 400] {
        *b ^= 0x5a;
    }
    std::fs::write(root.join(front), &bytes).unwrap();
    let _ = read_everything(&root);

    let root = fresh("truncated_parquet");
    let data = root.join("data/chunk-000/file-001.parquet");
    let bytes = std::fs::read(&data).unwrap();
    std::fs::write(&data, &bytes[..bytes.len() - 100]).unwrap();
    let err = read_everything(&root).unwrap_err();
    assert!(err.contains("file-001.parquet"), "{err}");

    let root = fresh("missing_data");
    std::fs::remove_file(root.join("data/chunk-000/file-002.parquet")).unwrap();
    let err = read_everything(&root).unwrap_err();
    assert!(err.contains("file-002.parquet") && err.contains("(episode "), "{err}");

    let root = fresh("future_version");
    let info = std::fs::read_to_string(root.join("meta/info.json")).unwrap().replace("\"v3.0\"", "\"v4.0\"");
    std::fs::write(root.join("meta/info.json"), info).unwrap();
    let err = Dataset::open(&root).unwrap_err().to_string();
    assert!(err.contains("v4.0") && err.contains("codebase_version"), "{err}");
}

/// `info.json` of `root` with `field` set to `value`.
fn set_info(root: &std::path::Path, field: &str, value: &str) {
    let path = root.join("meta/info.json");
    let mut info: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    info[field] = Value::String(value.into());
    std::fs::write(&path, serde_json::to_string_pretty(&info).unwrap()).unwrap();
}

#[test]
fn paths_from_metadata_stay_inside_the_root() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("root");
    copy_tree(&fixtures().join("av1"), &root).unwrap();
    // The same files outside the root, where an escaping template would find them.
    copy_tree(&root.join("data"), &scratch.path().join("outside/data")).unwrap();
    copy_tree(&root.join("videos"), &scratch.path().join("outside/videos")).unwrap();
    let escapes = [
        ("data_path", "../outside/data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet", "`..`"),
        ("data_path", "/etc/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet", "absolute"),
        ("data_path", "file:///data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet", "scheme"),
        ("video_path", "../outside/videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4", "`..`"),
        ("data_path", "data/chunk-{chunk_index:0999999999d}/file-{file_index:03d}.parquet", "digits"),
    ];
    for (case, (field, template, says)) in escapes.into_iter().enumerate() {
        let fresh = scratch.path().join(format!("case-{case}"));
        copy_tree(&root, &fresh).unwrap();
        set_info(&fresh, field, template);
        let err = Dataset::open(&fresh).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains("info.json") && err.contains(field) && err.contains(says), "{template}: {err}");
    }
}

#[test]
fn negative_indices_are_errors_not_episode_0() {
    use arrow_array::{Array, Int64Array, RecordBatch};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::arrow::ArrowWriter;

    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("root");
    copy_tree(&fixtures().join("av1"), &root).unwrap();
    // The first row of the first data file claims episode -1.
    let data = root.join("data/chunk-000/file-000.parquet");
    let reader =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&data).unwrap()).unwrap().build().unwrap();
    let batches: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
    let schema = batches[0].schema();
    let column = schema.index_of("episode_index").unwrap();
    let mut writer = ArrowWriter::try_new(std::fs::File::create(&data).unwrap(), schema.clone(), None).unwrap();
    for (i, batch) in batches.iter().enumerate() {
        let mut columns = batch.columns().to_vec();
        let mut indices: Vec<i64> = columns[column].as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec();
        if i == 0 {
            indices[0] = -1;
        }
        columns[column] = std::sync::Arc::new(Int64Array::from(indices));
        writer.write(&RecordBatch::try_new(schema.clone(), columns).unwrap()).unwrap();
    }
    writer.close().unwrap();
    let err = read_everything(&root).unwrap_err();
    assert!(err.contains("file-000.parquet") && err.contains("episode_index") && err.contains("-1"), "{err}");
}

/// Every window of `root` read in batches of `batch` (samples in a
/// scrambled order, so that a batch mixes episodes and groups of pictures)
/// through [`Dataset::read_delta_windows_into`]: per key of the spec, the
/// bytes and pads of all windows in that order, each checked against the
/// same window read alone.
fn batched_windows(dataset: &Dataset, spec: &DeltaTimestamps, batch: usize) -> Vec<(Vec<u8>, Vec<bool>)> {
    let windows = DeltaWindows::new(dataset.info(), spec).unwrap();
    let order: Vec<usize> = (0..windows.len()).map(|i| (i * 37) % windows.len()).collect();
    let mut out = vec![(Vec::new(), Vec::new()); spec.deltas.len()];
    for samples in order.chunks(batch) {
        let cut: Vec<_> = samples.iter().map(|&s| windows.window(s).unwrap()).collect();
        for (i, (key, _)) in spec.deltas.iter().enumerate() {
            let offsets = windows.offsets(i);
            let row_bytes = dataset.stream(0, key).unwrap().1.step_bytes();
            let mut bytes = vec![0u8; cut.len() * offsets.len() * row_bytes];
            let pads = dataset.read_delta_windows_into(&cut, key, offsets, &mut bytes).unwrap();
            // The same windows one at a time.
            let mut one = vec![0u8; offsets.len() * row_bytes];
            for (w, window) in cut.iter().enumerate() {
                let pad = dataset.read_delta_window_into(window, key, offsets, &mut one).unwrap();
                let span = w * one.len()..(w + 1) * one.len();
                assert_eq!(&bytes[span], one.as_slice(), "sample {}: {key}", window.sample);
                assert_eq!(&pads[w * offsets.len()..(w + 1) * offsets.len()], pad.as_slice());
            }
            // Video as YUV planes (what a loader uploads): each converts to
            // the RGB frame read above, with the same pads.
            if let Some((width, height)) = dataset.video_frame_size(key) {
                let frame_bytes = robocache_video::yuv420_len(width, height);
                let mut planes = vec![0u8; cut.len() * offsets.len() * frame_bytes];
                let yuv_pads =
                    dataset.read_delta_frames_into(&cut, key, offsets, FrameFormat::Yuv420, &mut planes).unwrap();
                assert_eq!(yuv_pads, pads, "{key}: pads of the YUV read");
                let mut rgb = vec![0u8; width * height * 3];
                for (frame, want) in planes.chunks_exact(frame_bytes).zip(bytes.chunks_exact(row_bytes)) {
                    robocache_video::yuv420_to_rgb_into(width, height, frame, &mut rgb);
                    assert!(rgb == want, "{key}: a YUV frame converts to the RGB frame");
                }
            }
            out[i].0.extend(bytes);
            out[i].1.extend(pads);
        }
    }
    out
}

#[test]
fn batched_windows_equal_single_windows_and_the_frame_cache_serves_later_epochs() {
    let dataset = Dataset::open(fixtures().join("av1")).unwrap();
    let (_, json) = expected("av1");
    let spec = deltas(&json);
    assert!(spec.deltas.iter().any(|(k, _)| k.starts_with("observation.images")), "the spec reads video");
    let usage = dataset.frame_cache_usage().unwrap();
    assert_eq!((usage.budget_bytes, usage.frames), (0, 0), "no frames kept by default");
    let uncached = batched_windows(&dataset, &spec, 16);

    // A budget for every frame: the first pass fills it, the second reads it.
    dataset.set_frame_cache_budget(64 << 20);
    let first = batched_windows(&dataset, &spec, 16);
    let filled = dataset.frame_cache_usage().unwrap();
    assert!(filled.frames > 0 && filled.misses > 0);
    // Kept as the decoder's YUV 4:2:0 planes: 1.5 bytes a pixel.
    assert_eq!(filled.bytes, filled.frames * 32 * 48 * 3 / 2);
    dataset.reset_frame_cache_counts();
    let second = batched_windows(&dataset, &spec, 7);
    let warm = dataset.frame_cache_usage().unwrap();
    assert_eq!(warm.misses, 0, "every frame comes from the cache");
    assert!(warm.hits > 0 && warm.hit_rate() == 1.0);
    assert_eq!(warm.frames, filled.frames);
    assert!(uncached == first && uncached == second, "frames from the cache equal decoded ones");

    // A budget of 10 frames: it keeps 10, the others are decoded every time.
    dataset.set_frame_cache_budget(10 * 32 * 48 * 3 / 2);
    let usage = dataset.frame_cache_usage().unwrap();
    assert_eq!((usage.frames, usage.bytes), (0, 0), "a lower budget drops what no longer fits");
    let partial = batched_windows(&dataset, &spec, 16);
    let usage = dataset.frame_cache_usage().unwrap();
    assert_eq!(usage.frames, 10);
    assert!(usage.misses > 0);
    assert!(uncached == partial);
}

/// Readers side by side (a loader's workers) decode each frame once: a
/// reader waits for a frame another one is decoding for the cache instead of
/// decoding it too, and every frame read equals the uncached read.
#[test]
fn readers_side_by_side_decode_each_frame_once() {
    let dataset = Dataset::open(fixtures().join("av1")).unwrap();
    let camera = "observation.images.front";
    let spec = DeltaTimestamps::new(vec![(camera.into(), vec![-0.1, 0.0, 0.1])]);
    let windows = DeltaWindows::new(dataset.info(), &spec).unwrap();
    let frame_bytes = robocache_video::yuv420_len(48, 32);
    let read = |samples: &[usize]| {
        let cut: Vec<_> = samples.iter().map(|&s| windows.window(s).unwrap()).collect();
        let mut planes = vec![0u8; cut.len() * 3 * frame_bytes];
        dataset.read_delta_frames_into(&cut, camera, windows.offsets(0), FrameFormat::Yuv420, &mut planes).unwrap();
        planes
    };
    let batches: Vec<Vec<usize>> = (0..windows.len()).collect::<Vec<_>>().chunks(4).map(<[usize]>::to_vec).collect();
    let uncached: Vec<Vec<u8>> = batches.iter().map(|b| read(b)).collect();
    dataset.set_frame_cache_budget(64 << 20);
    for round in 0..2 {
        let cached: Vec<Vec<u8>> = std::thread::scope(|scope| {
            let readers: Vec<_> = (0..4)
                .map(|reader| {
                    let (batches, read) = (&batches, &read);
                    scope.spawn(move || {
                        batches.iter().skip(reader).step_by(4).map(|b| (b.clone(), read(b))).collect::<Vec<_>>()
                    })
                })
                .collect();
            let mut all: Vec<(Vec<usize>, Vec<u8>)> = readers.into_iter().flat_map(|r| r.join().unwrap()).collect();
            all.sort();
            all.into_iter().map(|(_, planes)| planes).collect()
        });
        assert!(cached == uncached, "round {round}: cached frames equal decoded ones");
        let usage = dataset.frame_cache_usage().unwrap();
        let frames = dataset.info().episodes.iter().map(|e| e.len).sum::<usize>();
        assert_eq!(usage.frames, frames, "every frame of the camera held");
        assert_eq!(usage.misses as usize, frames, "round {round}: each frame decoded once: {usage:?}");
    }
}

#[test]
fn batched_image_feature_windows_equal_single_windows() {
    let dataset = Dataset::open(fixtures().join("images")).unwrap();
    let (_, json) = expected("images");
    assert!(dataset.frame_cache_usage().is_none(), "no video, no frame cache");
    batched_windows(&dataset, &deltas(&json), 16);
}

#[test]
fn verify_reads_every_row_and_frame_and_names_what_is_broken() {
    let dataset = Dataset::open(fixtures().join("av1")).unwrap();
    let report = dataset.verify(2);
    assert!(report.is_ok(), "{:?}", report.problems);
    let info = dataset.info();
    assert_eq!(report.episodes, info.episodes.len());
    let streams: Vec<_> = info.episodes.iter().flat_map(|e| &e.streams).collect();
    assert_eq!(report.streams, streams.len());
    assert_eq!(report.rows, streams.iter().map(|s| s.len).sum::<usize>());
    assert_eq!(report.bytes, streams.iter().map(|s| (s.len * s.step_bytes()) as u64).sum::<u64>());

    // A camera's video cut in half: the root still opens (the sample table
    // comes first); verify names the file, and only that camera fails.
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("truncated_video");
    copy_tree(&fixtures().join("av1"), &root).unwrap();
    let front = root.join("videos/observation.images.front/chunk-000/file-000.mp4");
    let bytes = std::fs::read(&front).unwrap();
    std::fs::write(&front, &bytes[..bytes.len() / 2]).unwrap();
    let broken = Dataset::open(&root).unwrap();
    let report = broken.verify(3);
    assert!(!report.is_ok());
    assert!(report.problems.iter().all(|p| p.stream == "observation.images.front"), "{:?}", report.problems);
    assert!(
        report.problems.iter().any(|p| p.error.contains("file-000.mp4") && p.error.contains("truncated")),
        "{:?}",
        report.problems
    );
    let episodes: Vec<&str> = info.episodes.iter().map(|e| e.name.as_str()).collect();
    assert!(report.problems.iter().all(|p| episodes.contains(&p.episode.as_str())));
    // Every other stream was read whole.
    assert_eq!(report.streams, streams.len());
    assert!(report.rows >= streams.iter().filter(|s| s.name != "observation.images.front").map(|s| s.len).sum());
}
