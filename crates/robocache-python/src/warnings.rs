//! Warnings of the Rust side (a header stamp not trusted, a topic missing
//! from a bag, video frames before a key frame, a summary read by a scan:
//! `tracing` events at WARN) kept for Python: a `tracing` layer holds the
//! last [`KEPT`] as text, and the Python package takes them after each call
//! that may warn and raises them as `robocache.RobocacheWarning`s
//! (`warnings.warn`, so Python's filters decide what is shown). Nothing is
//! called into Python from Rust threads: the loader's workers only push text.

use std::collections::VecDeque;
use std::fmt::Write;
use std::sync::Mutex;

use pyo3::prelude::*;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// The most warnings held between two takes (the oldest are dropped).
const KEPT: usize = 1024;

static HELD: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());

/// The message of an event, then its fields as `key=value`.
#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Visit for Text {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, "{}{}={value:?}", if self.fields.is_empty() { "" } else { ", " }, field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, "{}{}={value}", if self.fields.is_empty() { "" } else { ", " }, field.name());
        }
    }
}

struct Keep;

impl<S: Subscriber> Layer<S> for Keep {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        if *event.metadata().level() > Level::WARN {
            return;
        }
        let mut text = Text::default();
        event.record(&mut text);
        let line = match text.fields.is_empty() {
            true => text.message,
            false => format!("{} ({})", text.message, text.fields),
        };
        let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
        if held.len() == KEPT {
            held.pop_front();
        }
        held.push_back(line);
    }
}

/// Installs the layer as the process's subscriber, unless one is already
/// set (an embedding program's own, which then sees the events instead).
pub(crate) fn install() {
    let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Keep));
}

/// The warnings held since the last take, oldest first.
#[pyfunction]
pub(crate) fn take_warnings() -> Vec<String> {
    HELD.lock().unwrap_or_else(|p| p.into_inner()).drain(..).collect()
}
