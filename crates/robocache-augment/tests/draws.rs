//! Properties of the draws and of the CPU reference on any frame size and
//! config: crops lie inside the frame and every window of a config comes
//! out one size; draws are a function of (seed, epoch, sample, camera);
//! values stay in [0, 1]; neutral factors change nothing. And the JSON
//! configs Python passes.

use proptest::prelude::*;
use robocache_augment::reference::{augment_frame, augment_windows};
use robocache_augment::{preset, AugmentConfig, FrameAugment, Op, SampleKey, PRESETS};
use serde_json::json;

fn key() -> impl Strategy<Value = SampleKey> {
    (any::<u64>(), 0u64..100, 0u64..1_000_000, 0u64..4).prop_map(|(seed, epoch, sample, camera)| SampleKey {
        seed,
        epoch,
        sample,
        camera,
    })
}

proptest! {
    #[test]
    fn presets_draw_crops_inside_the_frame_at_one_output_size(
        preset_index in 0..PRESETS.len(), width in 12usize..90, height in 12usize..70, keys in proptest::collection::vec(key(), 1..6),
    ) {
        let config = preset(PRESETS[preset_index], &["cam_high", "cam_left_wrist"]).unwrap();
        let mut sizes = std::collections::BTreeSet::new();
        for k in &keys {
            for camera in ["cam_high", "cam_left_wrist"] {
                let params = config.for_camera(camera).draw(*k, (width, height));
                prop_assert_eq!(&params, &config.for_camera(camera).draw(*k, (width, height)));
                if let Some(c) = params.crop {
                    prop_assert!(c.width > 0 && c.height > 0 && c.left + c.width <= width && c.top + c.height <= height);
                }
                if camera == "cam_high" {
                    sizes.insert(params.output_size((width, height)));
                }
                let evaluation = config.for_camera(camera).evaluation().parameters((width, height));
                prop_assert!(evaluation.ops.is_empty());
                prop_assert_eq!(evaluation.output_size((width, height)), params.output_size((width, height)));
            }
        }
        prop_assert_eq!(sizes.len(), 1);
    }

    #[test]
    fn augmented_values_stay_in_range(k in key(), width in 3usize..24, height in 3usize..20, seed in any::<u64>()) {
        let config = preset("lerobot", &[]).unwrap();
        let mut params = config.default.draw(k, (width, height));
        params.ops.push(Op::Noise { mean: 0.0, sigma: 0.3, key: seed });
        params.ops.push(Op::Gamma(0.7));
        let frame: Vec<f32> = (0..width * height * 3).map(|i| (((i as u64 * 2654435761) ^ seed) % 256) as f32 / 255.0).collect();
        let out = augment_frame(&params, &frame, (width, height), 1);
        prop_assert!(out.iter().all(|v| (0.0..=1.0).contains(v)));
    }

    #[test]
    fn neutral_factors_change_nothing(width in 3usize..24, height in 3usize..20, seed in any::<u64>()) {
        let frame: Vec<f32> = (0..width * height * 3).map(|i| (((i as u64 * 40503) ^ seed) % 256) as f32 / 255.0).collect();
        for op in [Op::Brightness(1.0), Op::Contrast(1.0), Op::Saturation(1.0), Op::Sharpness(1.0), Op::Hue(0.0)] {
            let out = augment_frame(&FrameAugment { crop: None, ops: vec![op] }, &frame, (width, height), 0);
            for (a, b) in out.iter().zip(&frame) {
                prop_assert!((a - b).abs() <= 1e-6, "{:?}: {} vs {}", op, a, b);
            }
        }
    }
}

#[test]
fn window_frames_share_their_draws_but_not_their_noise() {
    let params =
        FrameAugment { crop: None, ops: vec![Op::Brightness(0.7), Op::Noise { mean: 0.0, sigma: 0.1, key: 3 }] };
    let frames = vec![0.5_f32; 2 * 8 * 6 * 3];
    let (out, size) = augment_windows(&frames, 2, (8, 6), &[params]).unwrap();
    assert_eq!(size, (8, 6));
    assert_ne!(out[..144], out[144..], "each frame its own noise");
    let mean = out.iter().sum::<f32>() / out.len() as f32;
    assert!((mean - 0.35).abs() < 0.02, "{mean}");
}

#[test]
fn json_configs_name_what_is_wrong() {
    let cameras = ["top", "wrist"];
    let parse = |v: serde_json::Value| AugmentConfig::from_json(&v, &cameras).map_err(|e| e.to_string());
    assert_eq!(parse(json!("act")).unwrap(), preset("act", &cameras).unwrap());
    // LeRobot's dict: enabled unless it says otherwise; a crop beside it.
    let lerobot =
        parse(json!({"tfs": {"b": {"type": "ColorJitter", "kwargs": {"brightness": 0.2}}}, "crop": {"fraction": 0.9}}))
            .unwrap();
    assert_eq!(lerobot.default.transforms.transforms.len(), 1);
    assert!(lerobot.default.crop.is_some());
    assert!(parse(json!({"enable": false, "tfs": {}})).unwrap().default.is_identity());
    let per_camera =
        parse(json!({"default": "openpi", "cameras": {"wrist": null}, "same_across_cameras": true})).unwrap();
    assert!(per_camera.for_camera("wrist").is_identity() && per_camera.same_across_cameras);
    for (bad, names) in [
        (json!(3), "is not a preset name, a dict or null"),
        (json!({"tfs": {"x": {"type": "ColorJitter", "kwargs": {"brightness": -1}}}}), "tfs.x.kwargs.brightness"),
        (
            json!({"tfs": {"x": {"type": "RandomAffine", "kwargs": {"degrees": 5, "shear": 3}}}}),
            "tfs.x.kwargs.shear: not supported",
        ),
        (json!({"crop": {"scale": [0.5, 1.0], "output": "crop"}}), "a random resized crop needs an output size"),
        (json!({"crop": {"fraction": 1.5}}), "fraction 1.5 is not in (0, 1]"),
        (json!({"crop": {"size": [0, 4]}}), "crop.size: [0,4] is not [height, width] in pixels"),
        (json!({"default": "act", "colour": 1}), "augment.colour: unknown field"),
        (json!({"max_num_transforms": "3"}), "max_num_transforms: \"3\" is not a count"),
    ] {
        let err = parse(bad.clone()).unwrap_err();
        assert!(err.contains(names), "{bad}: {err}");
    }
}
