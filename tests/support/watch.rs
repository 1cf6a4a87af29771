//! Every version of one object as the API server's watch delivers it: `kubectl get -w -o
//! json` run as admin in the background, its concatenated JSON documents parsed as they
//! arrive. A test asserts on the whole sequence of statuses afterwards (what kstatus or a
//! consumer could have seen at any moment), not just on the final state.

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::cluster::Cluster;

/// A running watch of `resource ns/name`; the kubectl process is killed on drop.
pub struct Watch {
    child: Child,
    seen: Arc<Mutex<Vec<Value>>>,
}

impl Watch {
    /// Starts watching (the current version is the first one seen, once it exists).
    pub fn start(cluster: &Cluster, resource: &str, ns: &str, name: &str) -> Self {
        let mut child = Command::new(&cluster.kubectl)
            .arg(format!(
                "--kubeconfig={}",
                cluster.admin_kubeconfig.display()
            ))
            .args(["get", resource, "-n", ns, "--field-selector"])
            .arg(format!("metadata.name={name}"))
            .args(["--watch", "--output-watch-events=false", "-o", "json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        std::thread::spawn(move || {
            let reader = std::io::BufReader::new(stdout);
            for doc in serde_json::Deserializer::from_reader(reader).into_iter::<Value>() {
                let Ok(doc) = doc else { return };
                // An empty list is what `get -w` prints before the object exists.
                if doc["kind"] != "List" {
                    sink.lock().unwrap().push(doc);
                }
            }
        });
        Self { child, seen }
    }

    /// The versions seen so far, in order.
    pub fn seen(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
