#!/usr/bin/env bash
# Makes the throwaway certificates of the TLS interop tests (openssl CLI), in
# $VERSO_TLS_DIR (default /tmp/verso-rabbitmq-tls):
#
#   ca.pem                          the test CA (its key is deleted once everything is signed)
#   server.pem, server-key.pem      the broker: localhost, 127.0.0.1, ::1
#   client.pem, client-key.pem      a client certificate of the test CA (RSA key, PKCS#8)
#   client-key.rsa.pem              the same key as PKCS#1 ("BEGIN RSA PRIVATE KEY")
#   client-ec.pem, client-ec-key.pem  a client certificate with a P-256 key (SEC1)
#   other-ca.pem                    an unrelated CA (a "wrong CA" for the tests)
#   other-client.pem, other-client-key.pem  a client certificate of that other CA
#
# Idempotent: keeps the files when they are all there and valid for another day, else
# makes a new set (all of it). Test material only: never use these anywhere else.
set -euo pipefail

dir="${VERSO_TLS_DIR:-/tmp/verso-rabbitmq-tls}"
days="${VERSO_TLS_DAYS:-30}"

certs=(ca.pem server.pem client.pem client-ec.pem other-ca.pem other-client.pem)
keys=(server-key.pem client-key.pem client-key.rsa.pem client-ec-key.pem other-client-key.pem)

still_good() {
    local f
    for f in "${certs[@]}" "${keys[@]}"; do
        [ -s "$dir/$f" ] || return 1
    done
    for f in "${certs[@]}"; do
        openssl x509 -noout -checkend 86400 -in "$dir/$f" >/dev/null 2>&1 || return 1
    done
    openssl verify -CAfile "$dir/ca.pem" "$dir/server.pem" "$dir/client.pem" \
        "$dir/client-ec.pem" >/dev/null 2>&1 || return 1
    openssl verify -CAfile "$dir/other-ca.pem" "$dir/other-client.pem" >/dev/null 2>&1
}

if ! command -v openssl >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "tls: installing the openssl command"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq openssl >/dev/null
    else
        echo "tls: the openssl command is missing (apt-get install -y openssl)" >&2
        exit 1
    fi
fi

if still_good; then
    echo "tls: test certificates in $dir are valid; kept"
    exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

# A v3 CA: self-signed from a CSR, with the extensions verifiers require of a CA.
make_ca() { # name subject
    openssl genpkey -quiet -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1-key.pem"
    openssl req -new -key "$1-key.pem" -subj "$2" -out "$1.csr"
    printf '%s\n' "basicConstraints = critical, CA:TRUE" \
        "keyUsage = critical, keyCertSign, cRLSign" \
        "subjectKeyIdentifier = hash" >"$1.ext"
    openssl x509 -req -in "$1.csr" -signkey "$1-key.pem" -days "$days" -sha256 \
        -extfile "$1.ext" -out "$1.pem" 2>/dev/null
}

# A leaf certificate: name subject ca key extended-key-usage [subject-alt-names]
make_leaf() {
    openssl req -new -key "$4" -subj "$2" -out "$1.csr"
    {
        echo "basicConstraints = critical, CA:FALSE"
        if [ "$5" = serverAuth ]; then
            echo "keyUsage = critical, digitalSignature, keyEncipherment"
        else
            echo "keyUsage = critical, digitalSignature"
        fi
        echo "extendedKeyUsage = $5"
        echo "authorityKeyIdentifier = keyid"
        if [ -n "${6:-}" ]; then echo "subjectAltName = $6"; fi
    } >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$3.pem" -CAkey "$3-key.pem" -CAcreateserial \
        -days "$days" -sha256 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
}

rsa_key() { openssl genpkey -quiet -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1"; }

make_ca ca "/CN=verso test CA"
make_ca other-ca "/CN=verso unrelated test CA"

rsa_key server-key.pem
make_leaf server "/CN=localhost" ca server-key.pem serverAuth \
    "DNS:localhost, IP:127.0.0.1, IP:::1"

rsa_key client-key.pem
make_leaf client "/CN=verso-test-client" ca client-key.pem clientAuth
openssl pkey -in client-key.pem -traditional -out client-key.rsa.pem

openssl ecparam -name prime256v1 -genkey -noout -out client-ec-key.pem
make_leaf client-ec "/CN=verso-test-client-ec" ca client-ec-key.pem clientAuth

rsa_key other-client-key.pem
make_leaf other-client "/CN=verso-untrusted-client" other-ca other-client-key.pem clientAuth

openssl verify -CAfile ca.pem server.pem client.pem client-ec.pem >/dev/null
openssl verify -CAfile other-ca.pem other-client.pem >/dev/null

mkdir -p "$dir"
chmod 755 "$dir"
for f in "${certs[@]}"; do
    install -m 644 "$f" "$dir/$f"
done
# The broker runs as the rabbitmq user: it must read the server key. The client keys
# stay with whoever made them (the tests run as the same user).
if [ "$(id -u)" = 0 ] && getent group rabbitmq >/dev/null 2>&1; then
    install -m 640 -g rabbitmq server-key.pem "$dir/server-key.pem"
else
    install -m 644 server-key.pem "$dir/server-key.pem"
fi
for f in client-key.pem client-key.rsa.pem client-ec-key.pem other-client-key.pem; do
    install -m 600 "$f" "$dir/$f"
done
rm -f "$dir/ca-key.pem" "$dir/other-ca-key.pem"
echo "tls: made test CA and certificates in $dir"
