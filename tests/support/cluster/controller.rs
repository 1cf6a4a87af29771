//! One `ocisource controller` process on the real control plane, as the chart's Deployment
//! would run it: its arguments, ServiceAccount token, loopback addresses and log file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::*;

/// One `ocisource controller` process, started with the arguments of the chart's
/// Deployment (addresses moved to free loopback ports, storage in a temp dir) and the
/// ServiceAccount's token; killed on drop.
pub struct Controller {
    child: Option<Child>,
    /// Artifact server address (`127.0.0.1:port`), also the advertised address.
    pub storage_addr: String,
    /// `/healthz` and `/readyz` address.
    pub health_addr: String,
    /// Prometheus metrics address.
    pub metrics_addr: String,
    /// Artifact store.
    pub storage: PathBuf,
    /// Log file (stdout and stderr).
    pub log: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

impl Controller {
    /// Starts the controller for namespace `ns` as `ns/ocisource`, with the chart's
    /// Deployment args rendered from `values`. `storage` may be shared between replicas
    /// (as a ReadWriteMany volume would be); `name` tells replicas apart (POD_NAME).
    pub fn start(cluster: &Cluster, ns: &str, values: &Value, storage: &Path, name: &str) -> Self {
        Self::start_advertising(cluster, ns, values, storage, name, None)
    }

    /// [`Controller::start`], advertising `adv` in artifact URLs instead of its own
    /// address (replicas behind one Service address).
    pub fn start_advertising(
        cluster: &Cluster,
        ns: &str,
        values: &Value,
        storage: &Path,
        name: &str,
        adv: Option<&str>,
    ) -> Self {
        Self::start_with_env(cluster, ns, values, storage, name, adv, &[])
    }

    /// [`Controller::start_advertising`] with more environment variables (cloud
    /// endpoints, proxies).
    pub fn start_with_env(
        cluster: &Cluster,
        ns: &str,
        values: &Value,
        storage: &Path,
        name: &str,
        adv: Option<&str>,
        extra_env: &[(&str, &str)],
    ) -> Self {
        let work = storage.parent().unwrap().to_path_buf();
        let kubeconfig = cluster.service_account_kubeconfig(ns, "ocisource", &work);
        let deployment: Value = serde_yaml_doc(&render_chart(ns, values, &["Deployment"]));
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let (storage_addr, health_addr, metrics_addr) = (free_addr(), free_addr(), free_addr());
        let args: Vec<String> = container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .map(|a| match a.split_once('=') {
                Some(("--storage-path", _)) => format!("--storage-path={}", storage.display()),
                Some(("--storage-addr", _)) => format!("--storage-addr={storage_addr}"),
                Some(("--storage-adv-addr", _)) => {
                    format!("--storage-adv-addr={}", adv.unwrap_or(&storage_addr))
                }
                Some(("--health-addr", _)) => format!("--health-addr={health_addr}"),
                Some(("--metrics-addr", _)) => format!("--metrics-addr={metrics_addr}"),
                Some(("--log-encoding", _)) => "--log-encoding=console".to_string(),
                Some(("--log-level", _)) => "--log-level=debug".to_string(),
                _ => a,
            })
            .collect();
        let mut env = vec![
            ("KUBECONFIG".to_string(), kubeconfig.display().to_string()),
            ("RUNTIME_NAMESPACE".to_string(), ns.to_string()),
            ("POD_NAME".to_string(), name.to_string()),
        ];
        env.extend(
            extra_env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        let mut c = Self {
            child: None,
            storage_addr,
            health_addr,
            metrics_addr,
            storage: storage.to_path_buf(),
            log: work.join(format!("{name}.log")),
            args,
            env,
        };
        c.spawn();
        c
    }

    fn spawn(&mut self) {
        std::fs::create_dir_all(&self.storage).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_ocisource"))
            .args(&self.args)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    /// Sends SIGKILL (a crashed pod) and waits for the process to end.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        match &mut self.child {
            Some(c) => c.try_wait().unwrap().is_none(),
            None => false,
        }
    }

    /// The controller's log so far (for failure messages).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// GETs an artifact URL path from this controller's artifact server.
    pub fn fetch(&self, url: &str) -> Result<Vec<u8>, String> {
        let out = Command::new("curl")
            .args(["-fsS", "--max-time", "10", url])
            .output()
            .unwrap();
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.kill();
    }
}
