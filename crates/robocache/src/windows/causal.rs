//! The causal rule of time windows ([`robocache_datasets::TimeWindowSpec::causal`]),
//! applied after a stream's window has been resampled with `Previous` for
//! every channel and clamped edges: a target before the stream's first
//! sample is padding and zeros, any other target holds the last sample at
//! or before it and is valid (even after the stream's last sample: a live
//! robot cannot know that a stream has ended). So a window depends only on
//! samples at or before its targets, and a running policy computes it live
//! exactly (`crate::live`). The resident CPU reference, the live windows
//! and the CUDA assembly kernel (`assemble_windows`) apply this rule.

/// Applies the causal rule to one window: `targets` `[T]`, `out` `[T,
/// channels]` resampled by `Previous` with clamped edges, `valid` `[T]`;
/// `first` is the time of the stream's first sample (`None`: it has none).
pub(crate) fn apply_causal_rule<T: Copy + Default>(
    targets: &[f64],
    first: Option<f64>,
    out: &mut [T],
    valid: &mut [bool],
    channels: usize,
) {
    for ((&q, row), valid) in targets.iter().zip(out.chunks_exact_mut(channels.max(1))).zip(valid.iter_mut()) {
        *valid = first.is_some_and(|first| q >= first);
        if !*valid {
            row.fill(T::default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::apply_causal_rule;

    #[test]
    fn before_the_first_sample_is_padding_and_zeros_after_it_everything_is_valid() {
        let mut out = vec![1.0f32, 1.0, 2.0, 2.0, 3.0, 3.0];
        let mut valid = vec![false, true, false];
        apply_causal_rule(&[0.5, 1.0, 9.0], Some(1.0), &mut out, &mut valid, 2);
        assert_eq!(valid, [false, true, true]);
        assert_eq!(out, [0.0, 0.0, 2.0, 2.0, 3.0, 3.0]);
        apply_causal_rule(&[0.5, 1.0, 9.0], None, &mut out, &mut valid, 2);
        assert_eq!((valid, out), (vec![false; 3], vec![0.0; 6]));
    }
}
