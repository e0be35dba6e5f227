//! S3 settings from the AWS shared files, as the AWS CLI and boto3 read
//! them: the profile `AWS_PROFILE` (else `default`) of
//! `AWS_SHARED_CREDENTIALS_FILE` (else `~/.aws/credentials`, sections
//! `[name]`) and of `AWS_CONFIG_FILE` (else `~/.aws/config`, sections
//! `[default]` and `[profile name]`). `object_store` reads the environment
//! and instance credentials but not these files; what they give is applied
//! only where the environment sets nothing, and the user's options override
//! both.

use std::collections::HashMap;
use std::path::PathBuf;

use object_store::aws::AmazonS3ConfigKey;

/// The `key = value` pairs of `section` in an INI text (`#` and `;` start
/// comments; keys are lower-cased; later duplicates win).
fn section(text: &str, wanted: &str) -> HashMap<String, String> {
    let mut current = None::<String>;
    let mut out = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = Some(name.trim().to_owned());
            continue;
        }
        if current.as_deref() != Some(wanted) {
            continue;
        }
        if let Some((key, value)) = line.split_once('=') {
            out.insert(key.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    out
}

/// The S3 settings of `profile` given the two files' texts; `env(name)`
/// says whether the environment sets a variable (those settings are left to it).
pub(crate) fn settings(
    credentials: &str,
    config: &str,
    profile: &str,
    env_sets: impl Fn(&str) -> bool,
) -> Vec<(AmazonS3ConfigKey, String)> {
    let config_section = match profile {
        "default" => "default".to_owned(),
        name => format!("profile {name}"),
    };
    // The credentials file wins over the config file, as in the AWS CLI.
    let mut values = section(config, &config_section);
    values.extend(section(credentials, profile));
    let mut out = Vec::new();
    let mut take = |key: &str, config_key: AmazonS3ConfigKey| {
        if let Some(value) = values.get(key).filter(|v| !v.is_empty()) {
            out.push((config_key, value.clone()));
        }
    };
    if !env_sets("AWS_ACCESS_KEY_ID") && values.contains_key("aws_access_key_id") {
        take("aws_access_key_id", AmazonS3ConfigKey::AccessKeyId);
        take("aws_secret_access_key", AmazonS3ConfigKey::SecretAccessKey);
        take("aws_session_token", AmazonS3ConfigKey::Token);
    }
    if !env_sets("AWS_REGION") && !env_sets("AWS_DEFAULT_REGION") {
        take("region", AmazonS3ConfigKey::Region);
    }
    if !env_sets("AWS_ENDPOINT_URL") && !env_sets("AWS_ENDPOINT") {
        take("endpoint_url", AmazonS3ConfigKey::Endpoint);
    }
    out
}

/// The settings of the current profile from the files on this machine.
pub(crate) fn from_files() -> Vec<(AmazonS3ConfigKey, String)> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let home = var("HOME").map(PathBuf::from);
    let file = |variable: &str, default: &str| {
        var(variable).map(PathBuf::from).or_else(|| home.as_ref().map(|h| h.join(".aws").join(default)))
    };
    let read = |path: Option<PathBuf>| path.and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();
    let credentials = read(file("AWS_SHARED_CREDENTIALS_FILE", "credentials"));
    let config = read(file("AWS_CONFIG_FILE", "config"));
    if credentials.is_empty() && config.is_empty() {
        return Vec::new();
    }
    let profile = var("AWS_PROFILE").map(|p| p.to_string_lossy().into_owned()).unwrap_or_else(|| "default".into());
    settings(&credentials, &config, &profile, |name| var(name).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CREDENTIALS: &str = "
# a comment
[default]
aws_access_key_id = AKIDEFAULT
aws_secret_access_key = secret-default

[lab]
aws_access_key_id=AKILAB
aws_secret_access_key=secret-lab
aws_session_token = token-lab
";
    const CONFIG: &str = "
[default]
region = eu-west-1
[profile lab]
region = us-east-2
endpoint_url = http://minio.lab:9000
; comment
";

    fn get(settings: &[(AmazonS3ConfigKey, String)], key: AmazonS3ConfigKey) -> Option<&str> {
        settings.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str())
    }

    #[test]
    fn profiles_read_as_the_aws_cli_reads_them() {
        let default = settings(CREDENTIALS, CONFIG, "default", |_| false);
        assert_eq!(get(&default, AmazonS3ConfigKey::AccessKeyId), Some("AKIDEFAULT"));
        assert_eq!(get(&default, AmazonS3ConfigKey::Region), Some("eu-west-1"));
        assert_eq!(get(&default, AmazonS3ConfigKey::Token), None);
        let lab = settings(CREDENTIALS, CONFIG, "lab", |_| false);
        assert_eq!(get(&lab, AmazonS3ConfigKey::SecretAccessKey), Some("secret-lab"));
        assert_eq!(get(&lab, AmazonS3ConfigKey::Token), Some("token-lab"));
        assert_eq!(get(&lab, AmazonS3ConfigKey::Region), Some("us-east-2"));
        assert_eq!(get(&lab, AmazonS3ConfigKey::Endpoint), Some("http://minio.lab:9000"));
        assert!(settings(CREDENTIALS, CONFIG, "nobody", |_| false).is_empty());
    }

    #[test]
    fn the_environment_wins_over_the_files() {
        let lab = settings(CREDENTIALS, CONFIG, "lab", |name| name == "AWS_ACCESS_KEY_ID" || name == "AWS_REGION");
        assert_eq!(get(&lab, AmazonS3ConfigKey::AccessKeyId), None);
        assert_eq!(get(&lab, AmazonS3ConfigKey::Token), None);
        assert_eq!(get(&lab, AmazonS3ConfigKey::Region), None);
        assert_eq!(get(&lab, AmazonS3ConfigKey::Endpoint), Some("http://minio.lab:9000"));
    }
}
