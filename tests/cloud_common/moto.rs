//! `moto` (PyPI `moto[server]`, in the repository's `.venv`, see hack/requirements.txt)
//! run as a server on 127.0.0.1 for one test: AWS STS, IAM and ECR answered locally.
//! Setup calls (IAM roles, users, keys) are sent before signatures are enforced; then
//! `require_signatures_after(n)` makes moto recompute the SigV4 signature of every
//! action after the next `n`, against the keys it issued. Its request recorder tells
//! the test exactly which calls were made.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;

use crate::support::pki::free_port;

/// A running moto server; killed on drop.
pub struct Moto {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
    http: reqwest::Client,
}

/// One request moto recorded.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// Request headers.
    pub headers: serde_json::Map<String, Value>,
    /// The body, decoded.
    pub body: String,
}

impl Recorded {
    /// A header, by name in any case.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| v.as_str())
    }
}

fn moto_bin() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/.venv/bin/moto_server"
    ))
}

impl Moto {
    /// Starts moto and waits until it answers.
    pub async fn start() -> Self {
        let bin = moto_bin();
        assert!(
            bin.exists(),
            "{} is missing: run hack/test.sh, which installs hack/requirements.txt (moto[server]) into .venv",
            bin.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .current_dir(dir.path())
            .env("MOTO_RECORDER_FILEPATH", dir.path().join("recording"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("moto.log")).unwrap())
            .spawn()
            .unwrap();
        let moto = Self {
            child,
            dir,
            port,
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let up = moto
                .http
                .get(format!("{}/moto-api/", moto.url()))
                .send()
                .await
                .is_ok();
            if up {
                return moto;
            }
            assert!(
                Instant::now() < deadline,
                "moto did not start: {}",
                moto.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// moto's own log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("moto.log")).unwrap_or_default()
    }

    /// An AWS query-protocol action on `service` (`iam`, `sts`), sent before signatures
    /// are enforced: the Authorization header only tells moto which service it is for.
    pub async fn action(&self, service: &str, pairs: &[(&str, &str)]) -> String {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        let auth = format!(
            "AWS4-HMAC-SHA256 Credential=AKIDSETUP/20250101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0"
        );
        let resp = self
            .http
            .post(format!("{}/", self.url()))
            .header("authorization", auth)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        assert!(status.is_success(), "{pairs:?}: {status}: {text}");
        text
    }

    /// A role that may call `ecr:GetAuthorizationToken`; returns its ARN.
    pub async fn ecr_role(&self, name: &str) -> String {
        let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":"arn:aws:iam::123456789012:oidc-provider/oidc.example"},"Action":"sts:AssumeRoleWithWebIdentity"}]}"#;
        self.action(
            "iam",
            &[
                ("Action", "CreateRole"),
                ("Version", "2010-05-08"),
                ("RoleName", name),
                ("AssumeRolePolicyDocument", trust),
            ],
        )
        .await;
        self.action(
            "iam",
            &[
                ("Action", "PutRolePolicy"),
                ("Version", "2010-05-08"),
                ("RoleName", name),
                ("PolicyName", "ecr-pull"),
                ("PolicyDocument", ECR_POLICY),
            ],
        )
        .await;
        format!("arn:aws:iam::123456789012:role/{name}")
    }

    /// A user that may call `ecr:GetAuthorizationToken`; returns its access key.
    pub async fn ecr_user_key(&self, name: &str) -> (String, String) {
        let v = "2010-05-08";
        self.action(
            "iam",
            &[("Action", "CreateUser"), ("Version", v), ("UserName", name)],
        )
        .await;
        self.action(
            "iam",
            &[
                ("Action", "PutUserPolicy"),
                ("Version", v),
                ("UserName", name),
                ("PolicyName", "ecr-pull"),
                ("PolicyDocument", ECR_POLICY),
            ],
        )
        .await;
        let xml = self
            .action(
                "iam",
                &[
                    ("Action", "CreateAccessKey"),
                    ("Version", v),
                    ("UserName", name),
                ],
            )
            .await;
        let field = |tag: &str| {
            let start = xml.find(&format!("<{tag}>")).unwrap() + tag.len() + 2;
            let end = xml[start..].find('<').unwrap() + start;
            xml[start..end].to_string()
        };
        (field("AccessKeyId"), field("SecretAccessKey"))
    }

    /// From now on, every action after the next `free` ones must carry a valid SigV4
    /// signature of a key moto issued.
    pub async fn require_signatures_after(&self, free: u32) {
        let resp = self
            .http
            .post(format!("{}/moto-api/reset-auth", self.url()))
            .body(free.to_string())
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success());
    }

    /// Starts recording requests.
    pub async fn record(&self) {
        self.http
            .post(format!("{}/moto-api/recorder/start-recording", self.url()))
            .send()
            .await
            .unwrap();
    }

    /// The requests recorded so far (none while moto has not written its recording file,
    /// whose download is then an error page).
    pub async fn recorded(&self) -> Vec<Recorded> {
        if !self.dir.path().join("recording").exists() {
            return Vec::new();
        }
        let text = self
            .http
            .get(format!(
                "{}/moto-api/recorder/download-recording",
                self.url()
            ))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                let raw = v["body"].as_str().unwrap_or_default();
                let body = if v["body_encoded"].as_bool() == Some(true) {
                    String::from_utf8(
                        base64::engine::general_purpose::STANDARD
                            .decode(raw)
                            .unwrap(),
                    )
                    .unwrap()
                } else {
                    raw.to_string()
                };
                Recorded {
                    headers: v["headers"].as_object().cloned().unwrap_or_default(),
                    body,
                }
            })
            .collect()
    }

    /// The recorded calls of `ECR GetAuthorizationToken`.
    pub async fn ecr_token_calls(&self) -> Vec<Recorded> {
        self.recorded()
            .await
            .into_iter()
            .filter(|r| {
                r.header("x-amz-target")
                    .is_some_and(|t| t.ends_with("GetAuthorizationToken"))
            })
            .collect()
    }

    /// The recorded calls of `STS AssumeRoleWithWebIdentity`, as form pairs.
    pub async fn assume_role_calls(&self) -> Vec<std::collections::HashMap<String, String>> {
        self.recorded()
            .await
            .into_iter()
            .map(|r| super::form(&r.body))
            .filter(|f| f.get("Action").map(String::as_str) == Some("AssumeRoleWithWebIdentity"))
            .collect()
    }
}

const ECR_POLICY: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ecr:GetAuthorizationToken","Resource":"*"}]}"#;

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
