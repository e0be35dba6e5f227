//! `ros2idl` definitions (OMG IDL as rosidl writes it, MCAP's other ROS 2
//! schema encoding) translated into the `ros2msg` text
//! [`MessageSchema::parse`] reads, so one parser and one decoder serve both.
//!
//! A schema is IDL files one after the other, each after a line of `=` and
//! an `IDL: pkg/msg/Type` line (the first, the root's, without them). What
//! is read: `module`s (`pkg::msg`), `struct`s and their members (every
//! primitive, `string`/`wstring` and their bounds, `sequence<T>`,
//! `sequence<T, N>`, fixed arrays `T name[N]`, scoped names `pkg::msg::T`),
//! `typedef`s of arrays (rosidl writes `typedef double double__9[9];`).
//! Skipped: comments, preprocessor lines, annotations (`@verbatim (...)`,
//! `@key`), `const` declarations (constants take no bytes on the wire). An
//! `enum` or `union`, which rosidl never writes for messages, is an error
//! that says so.

use std::collections::HashMap;

/// The deepest nesting of `module`s (rosidl writes two: `pkg::msg`); the
/// parser's recursion is this deep at most, so no schema overflows its stack.
const MAX_MODULE_NESTING: usize = 16;

/// `text` (a `ros2idl` schema whose root is `root`) as `ros2msg` text:
/// the root's fields, then a `MSG: pkg/Type` section per other struct.
pub(crate) fn to_msg_text(root: &str, text: &str) -> Result<String, String> {
    let tokens = tokens(text)?;
    let mut parser = Parser { tokens, at: 0, modules: Vec::new(), typedefs: HashMap::new(), structs: Vec::new() };
    parser.definitions(false)?;
    let root = super::msg_schema::canonical_name(root);
    let Some(first) = parser.structs.iter().position(|(name, _)| *name == root) else {
        return Err(format!("the IDL defines no struct `{root}`"));
    };
    let mut out = String::new();
    out.push_str(&parser.structs[first].1);
    for (at, (name, fields)) in parser.structs.iter().enumerate() {
        if at != first {
            out.push_str("================================================================================\nMSG: ");
            out.push_str(name);
            out.push('\n');
            out.push_str(fields);
        }
    }
    Ok(out)
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Word(String),
    Number(String),
    Text,
    Punct(char),
}

/// Words, numbers, string literals and punctuation; comments and
/// preprocessor lines dropped.
fn tokens(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut at = 0;
    let mut line_start = true;
    while at < chars.len() {
        let c = chars[at];
        if c == '\n' {
            line_start = true;
            at += 1;
            continue;
        }
        if c.is_whitespace() {
            at += 1;
            continue;
        }
        // A line of `=` then `IDL: name` separates files; `#` lines are the preprocessor's.
        if line_start && (c == '#' || c == '=' || text_at(&chars, at, "IDL:")) {
            while at < chars.len() && chars[at] != '\n' {
                at += 1;
            }
            continue;
        }
        line_start = false;
        if c == '/' && chars.get(at + 1) == Some(&'/') {
            while at < chars.len() && chars[at] != '\n' {
                at += 1;
            }
        } else if c == '/' && chars.get(at + 1) == Some(&'*') {
            at += 2;
            while at < chars.len() && !(chars[at] == '*' && chars.get(at + 1) == Some(&'/')) {
                at += 1;
            }
            if at >= chars.len() {
                return Err("a comment without its `*/`".into());
            }
            at += 2;
        } else if c == '"' {
            at += 1;
            while at < chars.len() && chars[at] != '"' {
                at += if chars[at] == '\\' { 2 } else { 1 };
            }
            if at >= chars.len() {
                return Err("a string without its closing quote".into());
            }
            at += 1;
            out.push(Token::Text);
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = at;
            while at < chars.len() && (chars[at].is_ascii_alphanumeric() || chars[at] == '_') {
                at += 1;
            }
            out.push(Token::Word(chars[start..at].iter().collect()));
        } else if c.is_ascii_digit() || (c == '-' && chars.get(at + 1).is_some_and(char::is_ascii_digit)) {
            let start = at;
            at += 1;
            while at < chars.len() && (chars[at].is_ascii_alphanumeric() || chars[at] == '.') {
                at += 1;
            }
            out.push(Token::Number(chars[start..at].iter().collect()));
        } else if c == ':' && chars.get(at + 1) == Some(&':') {
            out.push(Token::Punct('/'));
            at += 2;
        } else {
            out.push(Token::Punct(c));
            at += 1;
        }
    }
    Ok(out)
}

fn text_at(chars: &[char], at: usize, word: &str) -> bool {
    word.chars().enumerate().all(|(k, w)| chars.get(at + k) == Some(&w))
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    modules: Vec<String>,
    /// Typedef name (scoped) → (msg base type, fixed array length).
    typedefs: HashMap<String, (String, Option<usize>)>,
    /// `pkg/Type` → its fields as `ros2msg` lines.
    structs: Vec<(String, String)>,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Result<Token, String> {
        let token = self.tokens.get(self.at).cloned().ok_or("the IDL ends early")?;
        self.at += 1;
        Ok(token)
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        match self.next()? {
            Token::Punct(p) if p == c => Ok(()),
            other => Err(format!("expected `{c}`, found {}", describe(&other))),
        }
    }

    fn word(&mut self) -> Result<String, String> {
        match self.next()? {
            Token::Word(w) => Ok(w),
            other => Err(format!("expected a name, found {}", describe(&other))),
        }
    }

    /// Skips `@name` and `@name(...)` annotations.
    fn annotations(&mut self) -> Result<(), String> {
        while self.peek() == Some(&Token::Punct('@')) {
            self.at += 1;
            self.word()?;
            if self.peek() == Some(&Token::Punct('(')) {
                let mut depth = 0usize;
                loop {
                    match self.next()? {
                        Token::Punct('(') => depth += 1,
                        Token::Punct(')') => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }

    /// Definitions until the end (or, inside a module, its `}`).
    fn definitions(&mut self, in_module: bool) -> Result<(), String> {
        loop {
            self.annotations()?;
            match self.peek() {
                None if !in_module => return Ok(()),
                None => return Err("a module without its `}`".into()),
                Some(Token::Punct('}')) if in_module => {
                    self.at += 1;
                    if self.peek() == Some(&Token::Punct(';')) {
                        self.at += 1;
                    }
                    return Ok(());
                }
                Some(Token::Punct(';')) => self.at += 1,
                Some(Token::Word(w)) => match w.as_str() {
                    "module" => {
                        self.at += 1;
                        let name = self.word()?;
                        self.expect('{')?;
                        if self.modules.len() >= MAX_MODULE_NESTING {
                            return Err(format!("modules nested more than {MAX_MODULE_NESTING} deep"));
                        }
                        self.modules.push(name);
                        self.definitions(true)?;
                        self.modules.pop();
                    }
                    "struct" => self.structure()?,
                    "typedef" => self.typedef()?,
                    "const" => while self.next()? != Token::Punct(';') {},
                    other => {
                        return Err(format!("`{other}` declarations are not read (struct, typedef, const, module)"))
                    }
                },
                Some(other) => return Err(format!("unexpected {}", describe(other))),
            }
        }
    }

    /// The scoped name of `name` declared here (`pkg/Type` for `pkg::msg::Type`).
    fn declared(&self, name: &str) -> String {
        scoped(&self.modules.iter().map(String::as_str).chain([name]).collect::<Vec<_>>().join("/"))
    }

    /// A type: its `ros2msg` base and, for a sequence, `[]` or `[<=N]`.
    fn type_spec(&mut self) -> Result<(String, Option<String>), String> {
        let first = self.word()?;
        let base = match first.as_str() {
            "unsigned" => match self.word()?.as_str() {
                "short" => "uint16".to_owned(),
                "long" if self.peek() == Some(&Token::Word("long".into())) => {
                    self.at += 1;
                    "uint64".to_owned()
                }
                "long" => "uint32".to_owned(),
                other => return Err(format!("`unsigned {other}` is not an IDL type")),
            },
            "long" if self.peek() == Some(&Token::Word("long".into())) => {
                self.at += 1;
                "int64".to_owned()
            }
            "long" if self.peek() == Some(&Token::Word("double".into())) => {
                return Err("`long double` has no ROS 2 wire form robocache reads".into())
            }
            "sequence" => {
                self.expect('<')?;
                // Refused before the inner type is read: nesting never recurses.
                if self.peek() == Some(&Token::Word("sequence".into())) {
                    return Err("a sequence of sequences has no ros2msg form".into());
                }
                let (inner, nested) = self.type_spec()?;
                if nested.is_some() {
                    return Err("a sequence of sequences has no ros2msg form".into());
                }
                let bound = match self.next()? {
                    Token::Punct('>') => None,
                    Token::Punct(',') => {
                        let n = self.number()?;
                        self.expect('>')?;
                        Some(n)
                    }
                    other => return Err(format!("expected `>` or `,` in a sequence, found {}", describe(&other))),
                };
                let suffix = bound.map_or_else(|| "[]".to_owned(), |n| format!("[<={n}]"));
                return Ok((inner, Some(suffix)));
            }
            "string" | "wstring" => {
                if self.peek() == Some(&Token::Punct('<')) {
                    self.at += 1;
                    let n = self.number()?;
                    self.expect('>')?;
                    format!("{first}<={n}")
                } else {
                    first
                }
            }
            "short" => "int16".to_owned(),
            "long" => "int32".to_owned(),
            "boolean" => "bool".to_owned(),
            "octet" => "byte".to_owned(),
            "char" | "wchar" => "char".to_owned(),
            "float" => "float32".to_owned(),
            "double" => "float64".to_owned(),
            "int8" | "uint8" | "int16" | "uint16" | "int32" | "uint32" | "int64" | "uint64" => first,
            _ => {
                // A scoped name: `pkg/msg/Type` (`::` read as `/`) or a typedef.
                let mut name = first;
                while self.peek() == Some(&Token::Punct('/')) {
                    self.at += 1;
                    name.push('/');
                    name.push_str(&self.word()?);
                }
                let here = self.declared(&name);
                match self.typedefs.get(&here).or_else(|| self.typedefs.get(&scoped(&name))) {
                    Some((base, Some(n))) => return Ok((base.clone(), Some(format!("[{n}]")))),
                    Some((base, None)) => base.clone(),
                    None => scoped(&name),
                }
            }
        };
        Ok((base, None))
    }

    fn number(&mut self) -> Result<usize, String> {
        match self.next()? {
            Token::Number(n) => n.parse().map_err(|_| format!("`{n}` is not a size")),
            Token::Word(w) => Err(format!("a size given by the constant `{w}` is not read")),
            other => Err(format!("expected a size, found {}", describe(&other))),
        }
    }

    /// `[N]` after a declarator, if there.
    fn fixed(&mut self) -> Result<Option<usize>, String> {
        if self.peek() != Some(&Token::Punct('[')) {
            return Ok(None);
        }
        self.at += 1;
        let n = self.number()?;
        self.expect(']')?;
        if self.peek() == Some(&Token::Punct('[')) {
            return Err("multi-dimensional arrays have no ros2msg form".into());
        }
        Ok(Some(n))
    }

    fn typedef(&mut self) -> Result<(), String> {
        self.at += 1;
        let (base, sequence) = self.type_spec()?;
        let name = self.word()?;
        let fixed = self.fixed()?;
        self.expect(';')?;
        if sequence.is_some() && fixed.is_some() {
            return Err(format!("typedef `{name}`: an array of sequences has no ros2msg form"));
        }
        if sequence.is_some() {
            return Err(format!("typedef `{name}` of a sequence is not read"));
        }
        self.typedefs.insert(self.declared(&name), (base, fixed));
        Ok(())
    }

    fn structure(&mut self) -> Result<(), String> {
        self.at += 1;
        let name = self.word()?;
        let full = self.declared(&name);
        self.expect('{')?;
        let mut fields = String::new();
        loop {
            self.annotations()?;
            if self.peek() == Some(&Token::Punct('}')) {
                self.at += 1;
                break;
            }
            let (base, sequence) = self.type_spec()?;
            loop {
                let field = self.word()?;
                let fixed = self.fixed()?;
                let arity = match (&sequence, fixed) {
                    (Some(_), Some(_)) => return Err(format!("`{full}.{field}`: an array of sequences")),
                    (Some(suffix), None) => suffix.clone(),
                    (None, Some(n)) => format!("[{n}]"),
                    (None, None) => String::new(),
                };
                fields.push_str(&format!("{base}{arity} {field}\n"));
                match self.next()? {
                    Token::Punct(';') => break,
                    Token::Punct(',') => continue,
                    other => return Err(format!("`{full}.{field}`: expected `;`, found {}", describe(&other))),
                }
            }
        }
        self.expect(';')?;
        self.structs.push((full, fields));
        Ok(())
    }
}

/// `pkg/msg/Type` as `pkg/Type` (the `ros2msg` sections' names).
fn scoped(name: &str) -> String {
    super::msg_schema::canonical_name(name)
}

fn describe(token: &Token) -> String {
    match token {
        Token::Word(w) => format!("`{w}`"),
        Token::Number(n) => format!("`{n}`"),
        Token::Text => "a string".into(),
        Token::Punct(p) => format!("`{p}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg_schema::MessageSchema;

    /// What rosidl writes for sensor_msgs/Imu and its dependencies (trimmed
    /// comments), one file after the other as MCAP stores them.
    const IMU: &str = r#"// generated from rosidl_adapter/resource/msg.idl.em
#include "geometry_msgs/msg/Quaternion.idl"
#include "std_msgs/msg/Header.idl"

module sensor_msgs {
  module msg {
    typedef double double__9[9];
    @verbatim (language="comment", text=
      "This is a message to hold data from an IMU" "\n"
      "(Inertial Measurement Unit)")
    struct Imu {
      std_msgs::msg::Header header;
      geometry_msgs::msg::Quaternion orientation;
      double__9 orientation_covariance;
      geometry_msgs::msg::Vector3 angular_velocity;
      double__9 angular_velocity_covariance;
      geometry_msgs::msg::Vector3 linear_acceleration;
      double__9 linear_acceleration_covariance;
    };
  };
};
================================================================================
IDL: std_msgs/msg/Header
module std_msgs {
  module msg {
    struct Header {
      builtin_interfaces::msg::Time stamp;
      /* Transform frame with which this data is associated. */
      string frame_id;
    };
  };
};
================================================================================
IDL: builtin_interfaces/msg/Time
module builtin_interfaces {
  module msg {
    struct Time {
      int32 sec;
      @key uint32 nanosec;
    };
  };
};
================================================================================
IDL: geometry_msgs/msg/Quaternion
module geometry_msgs {
  module msg {
    struct Quaternion {
      @default (value=0.0)
      double x;
      @default (value=0.0)
      double y;
      @default (value=0.0)
      double z;
      @default (value=1.0)
      double w;
    };
  };
};
================================================================================
IDL: geometry_msgs/msg/Vector3
module geometry_msgs {
  module msg {
    module Vector3_Constants {
      const double SCALE = 1.0;
    };
    struct Vector3 {
      double x, y;
      double z;
      sequence<uint8, 4> tags;
      sequence<string<8>> names;
      unsigned long long count;
      boolean flags[2];
    };
  };
};
"#;

    #[test]
    fn rosidl_idl_reads_as_the_msg_it_was_made_from() {
        let text = to_msg_text("sensor_msgs/msg/Imu", IMU).unwrap();
        let schema = MessageSchema::parse("sensor_msgs/msg/Imu", &text).unwrap();
        let fields = |t: &str| {
            let ty = schema.types.iter().find(|ty| ty.name == t).unwrap();
            ty.fields.iter().map(|f| f.name.clone()).collect::<Vec<_>>()
        };
        assert_eq!(schema.root().name, "sensor_msgs/Imu");
        assert_eq!(fields("sensor_msgs/Imu")[2], "orientation_covariance");
        assert_eq!(fields("geometry_msgs/Vector3"), ["x", "y", "z", "tags", "names", "count", "flags"]);
        assert!(schema.has_header());
        assert!(text.contains("float64[9] orientation_covariance\n"), "{text}");
        assert!(text.contains("uint8[<=4] tags\n") && text.contains("string<=8[] names\n"), "{text}");
        assert!(text.contains("uint64 count\n") && text.contains("bool[2] flags\n"), "{text}");
    }

    #[test]
    fn what_is_not_read_is_an_error_that_says_so() {
        let error = |idl: &str| to_msg_text("p/msg/T", idl).unwrap_err();
        assert!(error("module p { module msg { enum E { A, B }; }; };").contains("`enum`"));
        assert!(error("module p { module msg { struct T { long double x; }; }; };").contains("long double"));
        assert!(error("module p { module msg { struct U { double x; }; }; };").contains("no struct `p/T`"));
        assert!(error("module p { module msg { struct T { double x[2][3]; }; }; };").contains("multi-dimensional"));
        assert!(error("module p { module msg { struct T { double x; ").contains("ends early"));
        assert!(error("/* never closed").contains("comment"));
    }

    #[test]
    fn nesting_that_would_overflow_the_stack_is_an_error() {
        let error = |idl: &str| to_msg_text("p/msg/T", idl).unwrap_err();
        let modules = "module m { ".repeat(100_000);
        assert!(error(&modules).contains("modules nested more than 16 deep"));
        let sequences = format!("module p {{ module msg {{ struct T {{ {} double", "sequence<".repeat(100_000));
        assert!(error(&sequences).contains("sequence of sequences"));
    }
}
