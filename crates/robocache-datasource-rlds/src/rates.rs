//! Control frequencies of the Open X-Embodiment datasets. RLDS stores no
//! timestamps: step `i` of an episode is at `i / rate` seconds, with the
//! rate of the dataset's name from this table, or
//! [`RldsOptions::rate_hz`](crate::RldsOptions::rate_hz).
//!
//! Source: the "control frequency" column of the Open X-Embodiment dataset
//! overview, as transcribed in LeRobot's Open X-Embodiment port
//! (`lerobot/common/datasets/push_dataset_to_hub/openx/configs.yaml`, key
//! `fps`). Names are those of the datasets' folders in the OXE bucket
//! (`gs://gresearch/robotics/<name>/<version>/`), which are the names in
//! their `dataset_info.json`.

/// `(dataset name, control frequency in Hz)`, sorted by name.
pub const OXE_RATES_HZ: &[(&str, f64)] = &[
    ("asu_table_top_converted_externally_to_rlds", 12.5),
    ("austin_buds_dataset_converted_externally_to_rlds", 20.0),
    ("austin_sailor_dataset_converted_externally_to_rlds", 20.0),
    ("austin_sirius_dataset_converted_externally_to_rlds", 20.0),
    ("bc_z", 10.0),
    ("berkeley_autolab_ur5", 5.0),
    ("berkeley_cable_routing", 10.0),
    ("berkeley_fanuc_manipulation", 10.0),
    ("berkeley_gnm_cory_hall", 5.0),
    ("berkeley_gnm_recon", 3.0),
    ("berkeley_gnm_sac_son", 10.0),
    ("berkeley_mvp_converted_externally_to_rlds", 5.0),
    ("berkeley_rpt_converted_externally_to_rlds", 30.0),
    ("bridge", 5.0),
    ("cmu_franka_exploration_dataset_converted_externally_to_rlds", 10.0),
    ("cmu_play_fusion", 5.0),
    ("cmu_playing_with_food", 10.0),
    ("cmu_stretch", 10.0),
    ("columbia_cairlab_pusht_real", 10.0),
    ("conq_hose_manipulation", 30.0),
    ("dlr_edan_shared_control_converted_externally_to_rlds", 5.0),
    ("dlr_sara_grid_clamp_converted_externally_to_rlds", 10.0),
    ("dlr_sara_pour_converted_externally_to_rlds", 10.0),
    ("dobbe", 3.75),
    ("droid", 15.0),
    ("droid_100", 15.0),
    ("fmb", 10.0),
    ("fractal20220817_data", 3.0),
    ("furniture_bench_dataset_converted_externally_to_rlds", 10.0),
    ("iamlab_cmu_pickup_insert_converted_externally_to_rlds", 20.0),
    ("imperialcollege_sawyer_wrist_cam", 10.0),
    ("io_ai_tech", 3.0),
    ("jaco_play", 10.0),
    ("kaist_nonprehensile_converted_externally_to_rlds", 10.0),
    ("kuka", 10.0),
    ("language_table", 10.0),
    ("maniskill_dataset_converted_externally_to_rlds", 20.0),
    ("nyu_door_opening_surprising_effectiveness", 3.0),
    ("nyu_franka_play_dataset_converted_externally_to_rlds", 3.0),
    ("nyu_rot_dataset_converted_externally_to_rlds", 3.0),
    ("plex_robosuite", 20.0),
    ("robo_net", 1.0),
    ("robo_set", 5.0),
    ("roboturk", 10.0),
    ("spoc", 3.0),
    ("stanford_hydra_dataset_converted_externally_to_rlds", 10.0),
    ("stanford_kuka_multimodal_dataset_converted_externally_to_rlds", 20.0),
    ("stanford_robocook_converted_externally_to_rlds", 5.0),
    ("taco_play", 15.0),
    ("tokyo_u_lsmo_converted_externally_to_rlds", 10.0),
    ("toto", 30.0),
    ("ucsd_kitchen_dataset_converted_externally_to_rlds", 2.0),
    ("ucsd_pick_and_place_dataset_converted_externally_to_rlds", 3.0),
    ("uiuc_d3field", 1.0),
    ("usc_cloth_sim_converted_externally_to_rlds", 10.0),
    ("utaustin_mutex", 20.0),
    ("utokyo_pr2_opening_fridge_converted_externally_to_rlds", 10.0),
    ("utokyo_pr2_tabletop_manipulation_converted_externally_to_rlds", 10.0),
    ("utokyo_xarm_bimanual_converted_externally_to_rlds", 10.0),
    ("utokyo_xarm_pick_and_place_converted_externally_to_rlds", 10.0),
    ("viola", 20.0),
];

/// The control frequency of the Open X-Embodiment dataset called `name`.
pub fn oxe_rate_hz(name: &str) -> Option<f64> {
    OXE_RATES_HZ.binary_search_by(|(n, _)| n.cmp(&name)).ok().map(|i| OXE_RATES_HZ[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_positive() {
        assert!(OXE_RATES_HZ.windows(2).all(|w| w[0].0 < w[1].0), "sorted, no duplicates");
        assert!(OXE_RATES_HZ.iter().all(|(_, hz)| *hz > 0.0));
        assert_eq!(oxe_rate_hz("bridge"), Some(5.0));
        assert_eq!(oxe_rate_hz("dobbe"), Some(3.75));
        assert_eq!(oxe_rate_hz("asu_table_top_converted_externally_to_rlds"), Some(12.5));
        assert_eq!(oxe_rate_hz("my_robot"), None);
    }
}
