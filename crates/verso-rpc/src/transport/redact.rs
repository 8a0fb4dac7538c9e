//! Transport and database URLs as they may be shown: passwords masked.

/// The URL with every password replaced by `***`, for error messages and logs: each
/// host's userinfo password (`scheme://user:***@host`, also when the password holds a
/// `/` or `?`) and the value of every query parameter named like a password, secret or
/// token (`?password=***`, `&sslpassword=***`).
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return match url.rsplit_once('@') {
            Some((_, host)) => format!("***@{host}"),
            None => url.to_owned(),
        };
    };
    // The userinfo ends at the last `@` before the query's first `=` (an `@` after it is
    // a query value's), so a password with `/` or `?` in it stays inside the netloc.
    let before_query_values = rest.find('=').unwrap_or(rest.len());
    let host_start = rest[..before_query_values]
        .rfind('@')
        .map_or(0, |at| at + 1);
    let end = rest[host_start..]
        .find(['/', '?'])
        .map_or(rest.len(), |i| host_start + i);
    let (netloc, tail) = rest.split_at(end);
    let hosts: Vec<String> = netloc
        .split(',')
        .map(|h| match h.rsplit_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) => format!("{user}:***@{host}"),
                None => h.to_owned(),
            },
            None => h.to_owned(),
        })
        .collect();
    let tail = match tail.split_once('?') {
        None => tail.to_owned(),
        Some((path, query)) => {
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if is_secret_key(key) => format!("{key}=***"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", pairs.join("&"))
        }
    };
    format!("{scheme}://{}{tail}", hosts.join(","))
}

/// Whether a query parameter carries a secret (`password`, `sslpassword`, `passwd`,
/// `pwd`, `secret`, `token`, in any case).
fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["pass", "pwd", "secret", "token"]
        .iter()
        .any(|word| key.contains(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction() {
        assert_eq!(
            redact("rabbit://u:pw@h1:5672,v:pw2@h2/vh?ssl=1"),
            "rabbit://u:***@h1:5672,v:***@h2/vh?ssl=1"
        );
        // Every password form a database or broker URL can carry.
        for (url, masked) in [
            ("postgres://u:s3cret@h/db", "postgres://u:***@h/db"),
            (
                "postgres://u@h/db?password=s3cret",
                "postgres://u@h/db?password=***",
            ),
            (
                "postgres://h/db?user=u&password=s3cret&sslmode=require",
                "postgres://h/db?user=u&password=***&sslmode=require",
            ),
            (
                "postgres://u:p@h/db?sslpassword=s3cret&PASSWORD=s3cret",
                "postgres://u:***@h/db?sslpassword=***&PASSWORD=***",
            ),
            ("postgres://u:s3/c?ret@h/db", "postgres://u:***@h/db"),
            (
                "postgres://u:s3cret@h/db?password=a@s3cret",
                "postgres://u:***@h/db?password=***",
            ),
            ("sqlite:///tmp/a.db?mode=rwc", "sqlite:///tmp/a.db?mode=rwc"),
        ] {
            assert_eq!(redact(url), masked, "{url}");
            assert!(!redact(url).contains("s3"), "{url}");
        }
    }
}
