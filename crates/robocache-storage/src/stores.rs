//! One `object_store` client per store (bucket, host, Hub repository and
//! revision), configured from the environment as each store's own tools
//! configure it, then from the options the user passed.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::http::HttpBuilder;
use object_store::{BackoffConfig, ClientConfigKey, ClientOptions, ObjectStore, RetryConfig};

use crate::location::{percent_encode, RemoteUrl, StoreKind};
use crate::{Error, Result};

/// The Hub's address when neither `hf_endpoint` nor `HF_ENDPOINT` says otherwise.
pub const HUB_ENDPOINT: &str = "https://huggingface.co";

/// Retries of a failed request: 5xx answers, dropped and refused
/// connections, timeouts, bodies cut short (resumed from where they broke).
/// Backoff 100 ms doubling to 5 s; by default at most 8 retries and 2
/// minutes per request, set by the options `max_retries` and `retry_timeout`
/// (seconds).
pub(crate) fn retry_config(options: &[(String, String)]) -> Result<RetryConfig> {
    let mut config = RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            base: 2.0,
        },
        max_retries: 8,
        retry_timeout: Duration::from_secs(120),
    };
    for (key, value) in options {
        let number = || {
            value.trim().parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0).ok_or_else(|| {
                Error::InvalidOption { key: key.clone(), reason: format!("`{value}` is not a number >= 0") }
            })
        };
        match key.as_str() {
            "max_retries" => config.max_retries = number()? as usize,
            "retry_timeout" => config.retry_timeout = Duration::from_secs_f64(number()?),
            _ => {}
        }
    }
    Ok(config)
}

/// Options robocache reads itself (the rest go to the store's builder).
const OWN_OPTIONS: &[&str] = &["max_retries", "retry_timeout", "hf_endpoint", "hf_token"];

/// Per request: 30 s in all, 5 s to connect. A slow server times out and
/// is retried; the loader never waits on a dead connection.
const CLIENT_DEFAULTS: [(ClientConfigKey, &str); 2] =
    [(ClientConfigKey::Timeout, "30s"), (ClientConfigKey::ConnectTimeout, "5s")];

fn client_options() -> ClientOptions {
    ClientOptions::new().with_timeout(Duration::from_secs(30)).with_connect_timeout(Duration::from_secs(5))
}

/// `$builder` (a store's builder, made from the environment) with the
/// user's `$options` (keys of `$key`, the store's config key enum), then
/// robocache's client defaults where neither set one. (Setting client
/// options whole after `from_env` would drop the ones the environment set,
/// `AWS_ALLOW_HTTP` among them.)
macro_rules! configured {
    ($builder:expr, $key:ident, $store:literal, $options:expr) => {{
        let mut builder = $builder;
        for (key, value) in $options.iter().copied() {
            let parsed = $key::from_str(key).map_err(|_| bad_key(key, $store))?;
            builder = builder.with_config(parsed, value);
        }
        for (key, value) in CLIENT_DEFAULTS {
            if builder.get_config_value(&$key::Client(key)).is_none() {
                builder = builder.with_config($key::Client(key), value);
            }
        }
        builder
    }};
}

/// The S3 client's builder: the environment (`AWS_*`, `AWS_ALLOW_HTTP`
/// included), the AWS files, then `options`, then robocache's timeouts.
fn s3_builder(url: &RemoteUrl, retry: RetryConfig, options: &[&(String, String)]) -> Result<AmazonS3Builder> {
    let mut builder = AmazonS3Builder::from_env().with_url(&url.store).with_retry(retry);
    for (key, value) in crate::aws_profile::from_files() {
        builder = builder.with_config(key, value);
    }
    Ok(configured!(builder, AmazonS3ConfigKey, "S3", options))
}

fn gcs_builder(
    url: &RemoteUrl,
    retry: RetryConfig,
    options: &[&(String, String)],
) -> Result<GoogleCloudStorageBuilder> {
    let builder = GoogleCloudStorageBuilder::from_env().with_url(&url.store).with_retry(retry);
    Ok(configured!(builder, GoogleConfigKey, "GCS", options))
}

fn azure_builder(url: &RemoteUrl, retry: RetryConfig, options: &[&(String, String)]) -> Result<MicrosoftAzureBuilder> {
    let builder = MicrosoftAzureBuilder::from_env().with_url(&url.store).with_retry(retry);
    Ok(configured!(builder, AzureConfigKey, "Azure", options))
}

fn bad_key(key: &str, store: &str) -> Error {
    Error::InvalidOption {
        key: key.into(),
        reason: format!("not an option of {store} stores (see object_store's config keys)"),
    }
}

/// The Hub's endpoint and token, found as `huggingface_hub` finds them.
#[derive(Clone)]
pub(crate) struct HubAccess {
    pub endpoint: String,
    pub token: Option<String>,
}

/// The token never prints.
impl std::fmt::Debug for HubAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubAccess")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| crate::REDACTED))
            .finish()
    }
}

impl HubAccess {
    /// `hf_endpoint` / `hf_token` options first, then `HF_ENDPOINT`,
    /// `HF_TOKEN`, then the token file (`HF_TOKEN_PATH`, else `$HF_HOME/token`,
    /// `HF_HOME` defaulting to `~/.cache/huggingface`).
    pub fn find(options: &[(String, String)]) -> HubAccess {
        let option = |key: &str| options.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        let endpoint = option("hf_endpoint")
            .or_else(|| std::env::var("HF_ENDPOINT").ok().filter(|v| !v.is_empty()))
            .unwrap_or_else(|| HUB_ENDPOINT.into())
            .trim_end_matches('/')
            .to_owned();
        let token = option("hf_token")
            .or_else(|| std::env::var("HF_TOKEN").ok())
            .or_else(|| {
                let path = std::env::var_os("HF_TOKEN_PATH").map(PathBuf::from).or_else(|| {
                    let home = std::env::var_os("HF_HOME")
                        .map(PathBuf::from)
                        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface")))?;
                    Some(home.join("token"))
                })?;
                std::fs::read_to_string(path).ok()
            })
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty());
        HubAccess { endpoint, token }
    }

    /// Where the Hub serves the files of `repo` at `revision`.
    pub fn resolve_base(&self, repo: &str, revision: &str) -> String {
        format!("{}/datasets/{repo}/resolve/{}", self.endpoint, percent_encode(revision))
    }
}

/// Builds the client of `url`'s store.
pub(crate) fn build(url: &RemoteUrl, all_options: &[(String, String)]) -> Result<Arc<dyn ObjectStore>> {
    let retry = retry_config(all_options)?;
    let options: Vec<&(String, String)> =
        all_options.iter().filter(|(k, _)| !OWN_OPTIONS.contains(&k.as_str())).collect();
    let build_error = |source| Error::Request { url: url.store.clone(), range: None, source: Box::new(source) };
    let store: Arc<dyn ObjectStore> = match url.kind {
        StoreKind::S3 => Arc::new(s3_builder(url, retry.clone(), &options)?.build().map_err(build_error)?),
        StoreKind::Gcs => Arc::new(gcs_builder(url, retry.clone(), &options)?.build().map_err(build_error)?),
        StoreKind::Azure => Arc::new(azure_builder(url, retry.clone(), &options)?.build().map_err(build_error)?),
        StoreKind::Http | StoreKind::Hub => {
            let mut client = client_options();
            if url.store.starts_with("http://") {
                client = client.with_allow_http(true);
            }
            let base = match &url.hub_repo {
                Some((repo, revision)) => {
                    let access = HubAccess::find(all_options);
                    if access.endpoint.starts_with("http://") {
                        client = client.with_allow_http(true);
                    }
                    if let Some(token) = &access.token {
                        let mut headers = object_store::HeaderMap::new();
                        let value = object_store::HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                            Error::InvalidOption {
                                key: "hf_token".into(),
                                reason: "is not a valid header value".into(),
                            }
                        })?;
                        headers.insert("authorization", value);
                        client = client.with_default_headers(headers);
                    }
                    access.resolve_base(repo, revision)
                }
                None => url.store.clone(),
            };
            for (key, value) in options.iter().copied() {
                let parsed = ClientConfigKey::from_str(key).map_err(|_| bad_key(key, "HTTP"))?;
                client = client.with_config(parsed, value);
            }
            Arc::new(
                HttpBuilder::new()
                    .with_url(base)
                    .with_retry(retry.clone())
                    .with_client_options(client)
                    .build()
                    .map_err(build_error)?,
            )
        }
    };
    Ok(store)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::Location;

    fn s3(text: &str) -> RemoteUrl {
        match Location::parse(Path::new(text)).unwrap() {
            Location::Remote(url) => url,
            Location::Local(_) => unreachable!(),
        }
    }

    #[test]
    fn client_options_the_environment_sets_are_kept() {
        // The only test of this crate that sets AWS_* variables.
        std::env::set_var("AWS_ALLOW_HTTP", "true");
        std::env::set_var("AWS_CONNECT_TIMEOUT", "7s");
        let retry = retry_config(&[]).unwrap();
        let builder = s3_builder(&s3("s3://bucket/x"), retry.clone(), &[]).unwrap();
        std::env::remove_var("AWS_ALLOW_HTTP");
        std::env::remove_var("AWS_CONNECT_TIMEOUT");
        let client = |key| builder.get_config_value(&AmazonS3ConfigKey::Client(key));
        assert_eq!(client(ClientConfigKey::AllowHttp).as_deref(), Some("true"));
        assert_eq!(client(ClientConfigKey::ConnectTimeout).as_deref(), Some("7s"));
        // robocache's own default where nothing set one.
        assert_eq!(client(ClientConfigKey::Timeout).as_deref(), Some("30s"));
        // An option given by the user wins over the environment.
        let options = [("aws_allow_http".to_owned(), "false".to_owned())];
        let given: Vec<&(String, String)> = options.iter().collect();
        let builder = s3_builder(&s3("s3://bucket/x"), retry, &given).unwrap();
        assert_eq!(
            builder.get_config_value(&AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp)).as_deref(),
            Some("false")
        );
    }

    #[test]
    fn the_hub_token_never_prints() {
        let access = HubAccess { endpoint: HUB_ENDPOINT.into(), token: Some("hf_secretvalue".into()) };
        let text = format!("{access:?}");
        assert!(!text.contains("hf_secretvalue") && text.contains("redacted"), "{text}");
    }
}
