//! Every kind of bad input of docs/semantics.md gets its own error, and no input panics.

use proptest::prelude::*;
use robocache_cpu::{
    fuse, resample, voxelize, Boundary, ChannelSpec, DType, Error, FusionInput, FusionStream, HostSlice, Method,
    Points, ResampleSpec, Stream, Targets, Times, VoxelGrid, VoxelMode,
};

fn linear() -> ResampleSpec {
    ResampleSpec::new(Method::Linear)
}

#[test]
fn shape_mismatch_names_the_argument() {
    let data = [0.0f32; 5];
    let err =
        resample(&Stream::new(&data, [1, 3, 2], Times::Shared(&[0.0, 1.0, 2.0])), &Targets::shared(&[0.5]), &linear());
    assert!(
        matches!(err, Err(Error::ShapeMismatch { ref what, expected: 6, actual: 5, .. }) if what == "resample data"),
        "{err:?}"
    );
    let data = [0.0f32; 6];
    let err = resample(&Stream::new(&data, [1, 3, 2], Times::Shared(&[0.0, 1.0])), &Targets::shared(&[0.5]), &linear());
    assert!(matches!(err, Err(Error::ShapeMismatch { ref what, .. }) if what == "resample source times"), "{err:?}");
    let err = resample(
        &Stream::new(&data, [1, 3, 2], Times::PerRow(&[0.0, 1.0, 2.0])),
        &Targets::per_row(&[0.5, 0.7], 1),
        &linear(),
    );
    assert!(matches!(err, Err(Error::ShapeMismatch { ref what, .. }) if what == "resample target times"), "{err:?}");
    let err = resample(
        &Stream::new(&data, [1, 3, 2], Times::Shared(&[0.0, 1.0, 2.0])).with_lengths(&[1, 2]),
        &Targets::shared(&[0.5]),
        &linear(),
    );
    assert!(matches!(err, Err(Error::ShapeMismatch { ref what, .. }) if what == "resample valid lengths"), "{err:?}");
}

#[test]
fn empty_dimensions() {
    let t = [0.0];
    for (shape, targets, dim) in [
        ([0, 1, 1], 1, "batch"),
        ([1, 0, 1], 1, "source samples"),
        ([1, 1, 0], 1, "channels"),
        ([1, 1, 1], 0, "targets"),
    ] {
        let data = vec![0.0f32; shape.iter().product()];
        let times: Vec<f64> = vec![0.0; shape[1]];
        let err =
            resample(&Stream::new(&data, shape, Times::Shared(&times)), &Targets::shared(&t[..targets]), &linear());
        assert!(matches!(err, Err(Error::Empty { ref what, .. }) if what.contains(dim)), "{dim}: {err:?}");
    }
}

#[test]
fn bad_source_times_name_row_and_index() {
    let data = [0.0f32; 6];
    let times = [0.0, 1.0, 2.0, 0.0, f64::NAN, 2.0];
    let err = resample(&Stream::new(&data, [2, 3, 1], Times::PerRow(&times)), &Targets::shared(&[0.5]), &linear());
    assert!(matches!(err, Err(Error::NonFiniteTime { row: 1, index: 1, .. })), "{err:?}");
    let times = [0.0, 1.0, 2.0, 0.0, 1.0, 1.0];
    let err = resample(&Stream::new(&data, [2, 3, 1], Times::PerRow(&times)), &Targets::shared(&[0.5]), &linear());
    let message = err.as_ref().unwrap_err().to_string();
    assert!(matches!(err, Err(Error::TimesNotIncreasing { row: 1, index: 2, .. })), "{message}");
    assert!(message.contains("row 1, index 2"), "{message}");
    // Padding past the valid length is not checked.
    let ok = resample(
        &Stream::new(&data, [2, 3, 1], Times::PerRow(&times)).with_lengths(&[3, 2]),
        &Targets::shared(&[0.5]),
        &linear(),
    );
    assert!(ok.is_ok(), "{ok:?}");
    // Trusted skips the check (and still gives an answer).
    let trusted = ResampleSpec { trusted: true, ..linear() };
    assert!(resample(&Stream::new(&data, [2, 3, 1], Times::PerRow(&times)), &Targets::shared(&[0.5]), &trusted).is_ok());
}

#[test]
fn bad_targets_and_uniform_rates() {
    let data = [0.0f32; 3];
    let err = resample(
        &Stream::new(&data, [1, 3, 1], Times::Uniform { start: 0.0, hz: 0.0 }),
        &Targets::shared(&[0.5]),
        &linear(),
    );
    assert!(matches!(err, Err(Error::BadUniformTimeline { .. })), "{err:?}");
    let err = resample(
        &Stream::new(&data, [1, 3, 1], Times::Uniform { start: 0.0, hz: 10.0 }),
        &Targets::shared(&[0.5, f64::INFINITY]),
        &linear(),
    );
    assert!(matches!(err, Err(Error::NonFiniteTime { index: 1, .. })), "{err:?}");
    let err = resample(
        &Stream::new(&data, [1, 3, 1], Times::Uniform { start: 1e16, hz: 1e3 }),
        &Targets::shared(&[0.5]),
        &linear(),
    );
    // 1e16 + 1 ms rounds back to 1e16: the uniform times do not increase.
    assert!(matches!(err, Err(Error::TimesNotIncreasing { index: 1, .. })), "{err:?}");
}

#[test]
fn bad_lengths() {
    let data = [0.0f32; 6];
    for lengths in [[0, 3], [3, 4]] {
        let err = resample(
            &Stream::new(&data, [2, 3, 1], Times::Shared(&[0.0, 1.0, 2.0])).with_lengths(&lengths),
            &Targets::shared(&[0.5]),
            &linear(),
        );
        let row = if lengths[0] == 0 { 0 } else { 1 };
        assert!(matches!(err, Err(Error::BadLength { row: r, .. }) if r == row), "{err:?}");
    }
}

#[test]
fn unsupported_method_dtype_pairs() {
    let data = [0u8; 8];
    let times = [0.0, 1.0];
    for method in [Method::Linear, Method::Slerp { order: robocache_cpu::QuaternionOrder::Xyzw }] {
        let err = resample(
            &Stream::new(&data, [1, 2, 4], Times::Shared(&times)),
            &Targets::shared(&[0.5]),
            &ResampleSpec::new(method),
        );
        assert!(matches!(err, Err(Error::UnsupportedMethod { dtype: DType::U8, .. })), "{err:?}");
    }
}

#[test]
fn bad_channel_specs_and_fill_values() {
    let data = [0.0f32; 8];
    let stream = Stream::new(&data, [1, 2, 4], Times::Shared(&[0.0, 1.0]));
    for spec in ["0..2:linear", "0..2:linear,3..4:linear", "0..3:slerp,3..4:linear", "1..4:linear"] {
        let channels: ChannelSpec = spec.parse().unwrap();
        let err = resample(&stream, &Targets::shared(&[0.5]), &linear().with_channels(channels));
        assert!(matches!(err, Err(Error::ChannelSpec { .. })), "{spec}: {err:?}");
    }
    let bytes = [0u8; 2];
    let stream = Stream::new(&bytes, [1, 2, 1], Times::Shared(&[0.0, 1.0]));
    for fill in [-1.0, 256.0, 0.5, f64::NAN] {
        let spec = ResampleSpec::new(Method::Previous).with_boundary(Boundary::Fill(fill));
        let err = resample(&stream, &Targets::shared(&[0.5]), &spec);
        assert!(matches!(err, Err(Error::FillValue { dtype: DType::U8, .. })), "{fill}: {err:?}");
    }
}

#[test]
fn fusion_errors() {
    let a = [0.0f32; 4];
    let b = [0.0f32; 2];
    let stream = |data, shape| FusionStream {
        data,
        shape,
        times: Times::Uniform { start: 0.0, hz: 10.0 },
        lengths: None,
        spec: ResampleSpec::new(Method::Previous),
    };
    let targets = Targets::shared(&[0.0]);
    let err = fuse(&FusionInput { streams: vec![], targets, dtype: DType::F32 });
    assert!(matches!(err, Err(Error::Empty { .. })), "{err:?}");
    let err = fuse(&FusionInput {
        streams: vec![stream(HostSlice::F32(&a), [2, 2, 1]), stream(HostSlice::F32(&b), [1, 2, 1])],
        targets,
        dtype: DType::F32,
    });
    assert!(matches!(err, Err(Error::ShapeMismatch { ref what, .. }) if what.starts_with("stream 1")), "{err:?}");
    let err = fuse(&FusionInput { streams: vec![stream(HostSlice::F32(&a), [2, 2, 1])], targets, dtype: DType::U8 });
    assert!(matches!(err, Err(Error::DTypeMismatch { .. })), "{err:?}");
    let bad_times = [0.0, 0.0];
    let mut s = stream(HostSlice::F32(&b), [1, 2, 1]);
    s.times = Times::Shared(&bad_times);
    let err =
        fuse(&FusionInput { streams: vec![stream(HostSlice::F32(&b), [1, 2, 1]), s], targets, dtype: DType::F32 });
    assert!(matches!(err, Err(Error::TimesNotIncreasing { ref what, .. }) if what.starts_with("stream 1")), "{err:?}");
}

#[test]
fn voxel_errors() {
    let grid = VoxelGrid { origin: [0.0; 3], voxel_size: [1.0; 3], dims: [4, 4, 4] };
    let points = [0.5f32; 6];
    let run = |p: Points<'_>, g: &VoxelGrid, mode, budget| voxelize(&p, g, mode, budget);
    for bad in [
        VoxelGrid { voxel_size: [1.0, 0.0, 1.0], ..grid },
        VoxelGrid { voxel_size: [1.0, f32::NAN, 1.0], ..grid },
        VoxelGrid { origin: [f32::INFINITY, 0.0, 0.0], ..grid },
        VoxelGrid { dims: [4, 0, 4], ..grid },
    ] {
        assert!(matches!(run(Points::new(&points), &bad, VoxelMode::Count, 1 << 20), Err(Error::BadGrid(_))));
    }
    let huge = VoxelGrid { dims: [1 << 20, 1 << 20, 1 << 20], ..grid };
    assert!(matches!(run(Points::new(&points), &huge, VoxelMode::Count, 1 << 30), Err(Error::GridTooLarge { .. })));
    let overflow = VoxelGrid { dims: [usize::MAX, 2, 1], ..grid };
    assert!(matches!(run(Points::new(&points), &overflow, VoxelMode::Count, u64::MAX), Err(Error::Overflow(_))));
    assert!(matches!(
        run(Points::new(&points[..5]), &grid, VoxelMode::Count, 1 << 20),
        Err(Error::ShapeMismatch { .. })
    ));
    let clouds = [0, 2];
    let err = run(Points::new(&points).with_clouds(&clouds, 2), &grid, VoxelMode::Count, 1 << 20);
    assert!(matches!(err, Err(Error::CloudIndex { point: 1, cloud: 2, clouds: 2 })), "{err:?}");
    assert!(matches!(run(Points::new(&points), &grid, VoxelMode::Mean, 1 << 20), Err(Error::Features { .. })));
    let features = [1.0f32; 3];
    assert!(matches!(
        run(Points::new(&points).with_features(&features, 2), &grid, VoxelMode::Max, 1 << 20),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(matches!(
        run(Points::new(&points).with_features(&features[..2], 1), &grid, VoxelMode::Count, 1 << 20),
        Err(Error::Features { .. })
    ));
    // No points is a valid, empty input.
    assert_eq!(run(Points::new(&[]), &grid, VoxelMode::Count, 1 << 20).unwrap().dropped, 0);
}

fn garbage_times() -> impl Strategy<Value = Vec<f64>> {
    proptest::collection::vec(prop_oneof![-3.0f64..3.0, Just(f64::NAN), Just(f64::INFINITY), Just(0.0)], 0..8)
}

proptest! {
    /// Whatever the shapes, lengths, times and specs, resample returns; it never panics.
    #[test]
    fn no_input_panics(
        shape in proptest::array::uniform3(0usize..4),
        data_len in 0usize..40,
        times in garbage_times(),
        per_row in any::<bool>(),
        lengths in proptest::option::of(proptest::collection::vec(0usize..5, 0..4)),
        targets in garbage_times(),
        target_len in 0usize..4,
        groups in "[0-9]\\.\\.[0-9]:(linear|nearest|previous|slerp)(,[0-9]\\.\\.[0-9]:(linear|previous))?",
        boundary in prop_oneof![Just(Boundary::Clamp), Just(Boundary::Extrapolate), Just(Boundary::Fill(2.0))],
        trusted in any::<bool>(),
    ) {
        let data = vec![1.0f32; data_len];
        let times = if per_row { Times::PerRow(&times) } else { Times::Shared(&times) };
        let spec = ResampleSpec { channels: groups.parse().unwrap(), boundary, trusted };
        let stream = Stream { data: &data, shape, times, lengths: lengths.as_deref() };
        let _ = resample(&stream, &Targets::per_row(&targets, target_len), &spec);
        let _ = resample(&stream, &Targets::shared(&targets), &spec);
    }
}
