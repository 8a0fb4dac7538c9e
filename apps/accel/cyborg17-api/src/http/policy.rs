//! Who may do what: Cyborg's policy rules, in oslo.policy's language. Release N's
//! frozen copy of `accel_api::policy` (N+1's), so release N's rules do not change when
//! N+1's do; without policy files: release N holds callers to Cyborg 17's defaults.
//!
//! Every handler names the rule it needs (Cyborg's names: `cyborg:arq:create`,
//! `cyborg:device_profile:get_all`, ...) and asks [`Policy::enforce`] with the
//! [`Caller`](crate::http::Caller)'s credentials. The rules are Cyborg 17's defaults
//! ([`DEFAULTS`]); [`Policy::with_overrides`] puts others on top.
//!
//! # The language
//!
//! The part of oslo.policy's check language that Cyborg's rules use:
//!
//! | check | true when |
//! |---|---|
//! | `@`, or an empty string | always |
//! | `!` | never |
//! | `rule:NAME` | the rule `NAME` is |
//! | `role:NAME` | the caller has the role (case-insensitive) |
//! | `KEY:%(FIELD)s` | the caller's credential `KEY` equals the target's `FIELD` |
//! | `KEY:VALUE`, `KEY:'VALUE'` | the caller's credential `KEY` is `VALUE` (`is_admin:True`) |
//!
//! joined by `not`, `and`, `or` (that precedence) and parentheses. Credentials are
//! `roles`, `user_id`, `project_id`, `domain_id`, `is_admin`, `service_roles`,
//! `service_user_id` and `service_project_id`; a list credential (`roles`,
//! `service_roles`) matches when it holds the value. The target, as in Cyborg, is the
//! caller's own `project_id` and `user_id`: `project_id:%(project_id)s` says "a token
//! scoped to a project", and which project's rows a caller sees is decided by project
//! isolation ([`Caller::sees_all_projects`](crate::http::Caller::sees_all_projects)),
//! not by the rule.
//!
//! A check accel does not know (`http:`), or a rule that names a missing rule or itself
//! (through others) is refused, with the rule named.

use crate::http::error::{ApiError, ErrorKind};
use std::collections::BTreeMap;

/// Cyborg 17's default rules (`cyborg/policies/*.py`, the new defaults), with one
/// addition: Nova's service role (`rule:service_api`) may also read device profiles and
/// accelerator requests, which Nova does at every boot (`GET
/// /v2/device_profiles?name=`, `GET /v2/accelerator_requests?instance=`), so that a
/// Nova whose service user has only the `service` role works.
pub const DEFAULTS: &[(&str, &str)] = &[
    // The base rules (cyborg/policies/base.py).
    ("admin_api", "role:admin"),
    (
        "project_admin_api",
        "role:admin and project_id:%(project_id)s",
    ),
    (
        "project_member_api",
        "role:member and project_id:%(project_id)s",
    ),
    (
        "project_reader_api",
        "role:reader and project_id:%(project_id)s",
    ),
    (
        "project_member_or_admin",
        "rule:project_member_api or rule:admin_api",
    ),
    (
        "project_reader_or_admin",
        "rule:project_reader_api or rule:admin_api",
    ),
    ("service_api", "role:service"),
    (
        "project_manager_api",
        "role:manager and project_id:%(project_id)s",
    ),
    (
        "project_manager_or_admin",
        "rule:project_manager_api or rule:admin_api",
    ),
    (
        "project_member_or_service",
        "rule:project_member_api or rule:service_api",
    ),
    // Accelerator requests (cyborg/policies/arqs.py).
    (
        "cyborg:arq:get_all",
        "rule:project_reader_or_admin or rule:service_api",
    ),
    (
        "cyborg:arq:get_one",
        "rule:project_reader_or_admin or rule:service_api",
    ),
    ("cyborg:arq:create", "rule:project_member_or_service"),
    ("cyborg:arq:delete", "rule:project_member_or_service"),
    ("cyborg:arq:update", "rule:project_member_or_service"),
    // accel's own: who sees and changes every project's requests rather than only its
    // own (project isolation, `Caller::sees_all_projects`).
    (
        "accel:arq:all_projects",
        "rule:admin_api or rule:service_api",
    ),
    // Device profiles (cyborg/policies/device_profiles.py).
    (
        "cyborg:device_profile:get_all",
        "rule:project_reader_or_admin or rule:service_api",
    ),
    (
        "cyborg:device_profile:get_one",
        "rule:project_reader_or_admin or rule:service_api",
    ),
    ("cyborg:device_profile:create", "rule:admin_api"),
    ("cyborg:device_profile:delete", "rule:admin_api"),
    // Devices and deployables (cyborg/policies/devices.py, deployables.py).
    ("cyborg:device:get_all", "rule:project_manager_or_admin"),
    ("cyborg:device:get_one", "rule:project_manager_or_admin"),
    ("cyborg:device:disable", "rule:admin_api"),
    ("cyborg:device:enable", "rule:admin_api"),
    ("cyborg:deployable:get_all", "rule:project_manager_or_admin"),
    ("cyborg:deployable:get_one", "rule:project_manager_or_admin"),
    ("cyborg:deployable:program", "rule:admin_api"),
    // Attributes (cyborg/policies/attributes.py).
    ("cyborg:attribute:get_all", "rule:project_manager_or_admin"),
    ("cyborg:attribute:get_one", "rule:project_manager_or_admin"),
    ("cyborg:attribute:create", "rule:admin_api"),
    ("cyborg:attribute:delete", "rule:admin_api"),
];

/// Why a policy could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// A rule's check string does not parse.
    #[error("policy rule {rule:?}: {why}")]
    Syntax {
        /// The rule.
        rule: String,
        /// What is wrong, and where.
        why: String,
    },
    /// A rule names a rule that does not exist.
    #[error("policy rule {rule:?} names rule:{missing}, which is not defined")]
    Undefined {
        /// The rule.
        rule: String,
        /// The missing rule.
        missing: String,
    },
    /// A rule depends on itself through `rule:` checks.
    #[error("policy rule {rule:?} depends on itself through rule: checks")]
    Cycle {
        /// The rule.
        rule: String,
    },
}

/// One parsed check.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Check {
    Always,
    Never,
    Rule(String),
    Role(String),
    /// `KEY:%(FIELD)s`: a credential equals a target field.
    Target {
        key: String,
        field: String,
    },
    /// `KEY:VALUE`: a credential equals a literal.
    Literal {
        key: String,
        value: String,
    },
    Not(Box<Check>),
    And(Vec<Check>),
    Or(Vec<Check>),
}

/// What a rule is checked against: the caller's credentials (see the module docs for
/// the keys).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Credentials {
    /// The caller's roles (Keystone's implied roles included).
    pub roles: Vec<String>,
    /// The user.
    pub user_id: Option<String>,
    /// The project the token is scoped to.
    pub project_id: Option<String>,
    /// The domain the token is scoped to.
    pub domain_id: Option<String>,
    /// Whether the caller is a cloud administrator (the `admin` role, or `noauth`).
    pub is_admin: bool,
    /// The roles of a valid service token sent beside the user's (`X-Service-Token`).
    pub service_roles: Vec<String>,
    /// The service token's user.
    pub service_user_id: Option<String>,
    /// The service token's project.
    pub service_project_id: Option<String>,
    /// The token is scoped to the system (`"all"`), not a project or domain.
    pub system_scope: Option<String>,
}

impl Credentials {
    /// The values of credential `key`, as text.
    fn values(&self, key: &str) -> Vec<String> {
        let one = |v: &Option<String>| v.iter().cloned().collect();
        match key {
            "roles" => self.roles.clone(),
            "service_roles" => self.service_roles.clone(),
            "user_id" => one(&self.user_id),
            "project_id" => one(&self.project_id),
            "domain_id" => one(&self.domain_id),
            "service_user_id" => one(&self.service_user_id),
            "service_project_id" => one(&self.service_project_id),
            // Python's str(bool), as oslo.policy compares.
            "is_admin" => vec![if self.is_admin { "True" } else { "False" }.to_owned()],
            _ => Vec::new(),
        }
    }
}

/// The rules in force: the defaults with the operator's overrides.
#[derive(Clone, Debug)]
pub struct Policy {
    rules: BTreeMap<String, Check>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy::with_overrides(BTreeMap::new()).unwrap_or_else(|_| Policy {
            // The defaults are checked by a unit test; never reached.
            rules: BTreeMap::new(),
        })
    }
}

impl Policy {
    /// The defaults with `overrides` (rule name to check string) on top.
    pub fn with_overrides(overrides: BTreeMap<String, String>) -> Result<Policy, PolicyError> {
        let mut text: BTreeMap<String, String> = DEFAULTS
            .iter()
            .map(|(n, c)| ((*n).to_owned(), (*c).to_owned()))
            .collect();
        text.extend(overrides);
        let mut rules = BTreeMap::new();
        for (name, check) in &text {
            let parsed = parse(check).map_err(|why| PolicyError::Syntax {
                rule: name.clone(),
                why,
            })?;
            rules.insert(name.clone(), parsed);
        }
        let policy = Policy { rules };
        for name in policy.rules.keys() {
            policy.check_references(name, &mut Vec::new())?;
        }
        Ok(policy)
    }

    /// Refuses a rule that names a missing rule or reaches itself.
    fn check_references(&self, name: &str, path: &mut Vec<String>) -> Result<(), PolicyError> {
        if path.iter().any(|p| p == name) {
            return Err(PolicyError::Cycle {
                rule: path.first().cloned().unwrap_or_else(|| name.to_owned()),
            });
        }
        let Some(check) = self.rules.get(name) else {
            return Err(PolicyError::Undefined {
                rule: path.last().cloned().unwrap_or_default(),
                missing: name.to_owned(),
            });
        };
        path.push(name.to_owned());
        let mut names = Vec::new();
        referenced(check, &mut names);
        for n in names {
            self.check_references(&n, path)?;
        }
        path.pop();
        Ok(())
    }

    /// Whether `creds` pass rule `name` (false for a rule that does not exist). Every
    /// rule is for project-scoped tokens (Cyborg's `scope_types=['project']`, enforced
    /// as oslo.policy's `enforce_scope`): a system-scoped token passes none.
    pub fn allows(&self, name: &str, creds: &Credentials) -> bool {
        creds.system_scope.is_none() && self.rules.get(name).is_some_and(|c| self.eval(c, creds, 0))
    }

    /// 403 `Forbidden` naming the rule unless `creds` pass it.
    pub fn enforce(&self, name: &str, creds: &Credentials) -> Result<(), ApiError> {
        if self.allows(name, creds) {
            Ok(())
        } else if creds.system_scope.is_some() {
            Err(ApiError::new(
                ErrorKind::Forbidden,
                format!("{name} is a project API: a system-scoped token is not allowed"),
            ))
        } else {
            Err(ApiError::new(
                ErrorKind::Forbidden,
                format!("policy does not allow {name} to be performed"),
            ))
        }
    }

    fn eval(&self, check: &Check, creds: &Credentials, depth: usize) -> bool {
        // Cycles are refused at load; the bound is a second guard.
        if depth > 64 {
            return false;
        }
        match check {
            Check::Always => true,
            Check::Never => false,
            Check::Rule(name) => self
                .rules
                .get(name)
                .is_some_and(|c| self.eval(c, creds, depth + 1)),
            Check::Role(role) => creds.roles.iter().any(|r| r.eq_ignore_ascii_case(role)),
            Check::Target { key, field } => {
                // The target is the caller's own project and user (as Cyborg's).
                let wanted = match field.as_str() {
                    "project_id" => creds.project_id.as_deref(),
                    "user_id" => creds.user_id.as_deref(),
                    _ => None,
                };
                wanted.is_some_and(|w| creds.values(key).iter().any(|v| v == w))
            }
            Check::Literal { key, value } => creds.values(key).iter().any(|v| v == value),
            Check::Not(c) => !self.eval(c, creds, depth + 1),
            Check::And(cs) => cs.iter().all(|c| self.eval(c, creds, depth + 1)),
            Check::Or(cs) => cs.iter().any(|c| self.eval(c, creds, depth + 1)),
        }
    }
}

fn referenced(check: &Check, out: &mut Vec<String>) {
    match check {
        Check::Rule(n) => out.push(n.clone()),
        Check::Not(c) => referenced(c, out),
        Check::And(cs) | Check::Or(cs) => cs.iter().for_each(|c| referenced(c, out)),
        _ => {}
    }
}

/// The tokens of a check string, as oslo.policy splits them: words between blanks
/// (a quoted literal may hold blanks), with parentheses peeled off a word's start and
/// end, so `%(project_id)s` stays whole.
fn tokens(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut chars = text.chars();
    let mut word = String::new();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            '\'' | '"' => {
                word.push(c);
                loop {
                    match chars.next() {
                        Some(q) if q == c => {
                            word.push(q);
                            break;
                        }
                        Some(other) => word.push(other),
                        None => return Err(format!("unclosed quote {c} in {text:?}")),
                    }
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    let mut out = Vec::new();
    for word in words {
        let inner = word.trim_start_matches('(');
        for _ in 0..word.len() - inner.len() {
            out.push("(".to_owned());
        }
        let core = inner.trim_end_matches(')');
        if !core.is_empty() {
            out.push(core.to_owned());
        }
        for _ in 0..inner.len() - core.len() {
            out.push(")".to_owned());
        }
    }
    Ok(out)
}

/// Parses a check string.
fn parse(text: &str) -> Result<Check, String> {
    let tokens = tokens(text)?;
    if tokens.is_empty() {
        return Ok(Check::Always);
    }
    let mut pos = 0;
    let check = parse_or(&tokens, &mut pos)?;
    match tokens.get(pos) {
        None => Ok(check),
        Some(t) => Err(format!("unexpected {t:?} after a complete check")),
    }
}

fn parse_or(tokens: &[String], pos: &mut usize) -> Result<Check, String> {
    let mut any = vec![parse_and(tokens, pos)?];
    while tokens.get(*pos).is_some_and(|t| t == "or") {
        *pos += 1;
        any.push(parse_and(tokens, pos)?);
    }
    Ok(if any.len() == 1 {
        any.remove(0)
    } else {
        Check::Or(any)
    })
}

fn parse_and(tokens: &[String], pos: &mut usize) -> Result<Check, String> {
    let mut all = vec![parse_not(tokens, pos)?];
    while tokens.get(*pos).is_some_and(|t| t == "and") {
        *pos += 1;
        all.push(parse_not(tokens, pos)?);
    }
    Ok(if all.len() == 1 {
        all.remove(0)
    } else {
        Check::And(all)
    })
}

fn parse_not(tokens: &[String], pos: &mut usize) -> Result<Check, String> {
    match tokens.get(*pos).map(String::as_str) {
        Some("not") => {
            *pos += 1;
            Ok(Check::Not(Box::new(parse_not(tokens, pos)?)))
        }
        Some("(") => {
            *pos += 1;
            let inner = parse_or(tokens, pos)?;
            match tokens.get(*pos).map(String::as_str) {
                Some(")") => {
                    *pos += 1;
                    Ok(inner)
                }
                _ => Err("a ( without its )".into()),
            }
        }
        Some(word) => {
            *pos += 1;
            check_of(word)
        }
        None => Err("the check ends where a check is expected".into()),
    }
}

/// One check word: `@`, `!`, `rule:X`, `role:X`, `KEY:%(FIELD)s`, `KEY:VALUE`.
fn check_of(word: &str) -> Result<Check, String> {
    match word {
        "@" => return Ok(Check::Always),
        "!" => return Ok(Check::Never),
        "and" | "or" | ")" => return Err(format!("{word:?} where a check is expected")),
        _ => {}
    }
    let Some((kind, value)) = word.split_once(':') else {
        return Err(format!("{word:?} is not a check (KIND:VALUE, @ or !)"));
    };
    if kind.is_empty() || value.is_empty() {
        return Err(format!("{word:?} is not a check (KIND:VALUE, @ or !)"));
    }
    Ok(match kind {
        "rule" => Check::Rule(value.to_owned()),
        "role" => Check::Role(value.to_owned()),
        "http" | "https" => {
            return Err(format!(
                "{word:?}: remote (http) checks are not supported by accel"
            ))
        }
        key => {
            if let Some(field) = value.strip_prefix("%(").and_then(|v| v.strip_suffix(")s")) {
                Check::Target {
                    key: key.to_owned(),
                    field: field.to_owned(),
                }
            } else {
                let unquoted = value
                    .strip_prefix('\'')
                    .and_then(|v| v.strip_suffix('\''))
                    .or_else(|| value.strip_prefix('"').and_then(|v| v.strip_suffix('"')))
                    .unwrap_or(value);
                Check::Literal {
                    key: key.to_owned(),
                    value: unquoted.to_owned(),
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(roles: &[&str], project: Option<&str>) -> Credentials {
        Credentials {
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            user_id: Some("u1".into()),
            project_id: project.map(str::to_owned),
            is_admin: roles.contains(&"admin"),
            ..Credentials::default()
        }
    }

    #[test]
    fn the_defaults_load_and_mean_what_cyborg_says() {
        let p = Policy::with_overrides(BTreeMap::new()).expect("defaults parse");
        assert_eq!(p.rules.len(), DEFAULTS.len());
        let admin = creds(&["admin", "member", "reader"], Some("p"));
        let member = creds(&["member", "reader"], Some("p"));
        let reader = creds(&["reader"], Some("p"));
        let service = creds(&["service"], Some("s"));
        let unscoped_member = creds(&["member"], None);
        // (rule, admin, member, reader, service, member without a project)
        let table = [
            (
                "cyborg:device_profile:create",
                true,
                false,
                false,
                false,
                false,
            ),
            (
                "cyborg:device_profile:get_all",
                true,
                true,
                true,
                true,
                false,
            ),
            ("cyborg:arq:create", true, true, false, true, false),
            ("cyborg:arq:update", true, true, false, true, false),
            ("cyborg:arq:get_one", true, true, true, true, false),
            ("cyborg:device:get_all", true, false, false, false, false),
            ("cyborg:device:disable", true, false, false, false, false),
            ("cyborg:attribute:get_all", true, false, false, false, false),
            ("cyborg:attribute:create", true, false, false, false, false),
            ("cyborg:attribute:delete", true, false, false, false, false),
            ("no:such:rule", false, false, false, false, false),
        ];
        for (rule, a, m, r, s, u) in table {
            assert_eq!(p.allows(rule, &admin), a, "{rule} admin");
            assert_eq!(p.allows(rule, &member), m, "{rule} member");
            assert_eq!(p.allows(rule, &reader), r, "{rule} reader");
            assert_eq!(p.allows(rule, &service), s, "{rule} service");
            assert_eq!(p.allows(rule, &unscoped_member), u, "{rule} unscoped");
        }
        let system_admin = Credentials {
            system_scope: Some("all".into()),
            project_id: None,
            ..admin.clone()
        };
        assert!(!p.allows("cyborg:device:get_all", &system_admin));
        let e = p
            .enforce("cyborg:device_profile:create", &member)
            .expect_err("403");
        assert_eq!(e.kind, ErrorKind::Forbidden);
        assert!(
            e.message.contains("cyborg:device_profile:create"),
            "{}",
            e.message
        );
    }

    #[test]
    fn the_language() {
        let p = |overrides: &[(&str, &str)]| {
            Policy::with_overrides(
                overrides
                    .iter()
                    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                    .collect(),
            )
        };
        let member = creds(&["member"], Some("p"));
        let policy = p(&[
            ("x:always", ""),
            ("x:at", "@"),
            ("x:never", "!"),
            ("x:not", "not role:admin"),
            ("x:prec", "role:admin or role:member and not role:member"),
            ("x:paren", "(role:admin or role:member) and not role:reader"),
            ("x:literal", "is_admin:False and user_id:'u1'"),
            ("x:target", "user_id:%(user_id)s"),
            ("x:role_case", "role:MEMBER"),
            ("x:service_roles", "service_roles:service"),
        ])
        .expect("parses");
        for (rule, want) in [
            ("x:always", true),
            ("x:at", true),
            ("x:never", false),
            ("x:not", true),
            ("x:prec", false),
            ("x:paren", true),
            ("x:literal", true),
            ("x:target", true),
            ("x:role_case", true),
            ("x:service_roles", false),
        ] {
            assert_eq!(policy.allows(rule, &member), want, "{rule}");
        }
        for (bad, what) in [
            ("role:admin or", "ends"),
            ("(role:admin", "("),
            ("role:admin)", "unexpected"),
            ("admin", "not a check"),
            ("http://example.com", "remote"),
            ("user_id:'u1", "quote"),
        ] {
            let e = p(&[("x:bad", bad)]).expect_err(bad);
            assert!(
                matches!(&e, PolicyError::Syntax { rule, why } if rule == "x:bad" && why.contains(what)),
                "{bad}: {e}"
            );
        }
        assert!(matches!(
            p(&[("x:a", "rule:nope")]),
            Err(PolicyError::Undefined { missing, .. }) if missing == "nope"
        ));
        assert!(matches!(
            p(&[("x:a", "rule:x:b"), ("x:b", "role:admin or rule:x:a")]),
            Err(PolicyError::Cycle { .. })
        ));
    }
}
