"""Keystone, Placement and Glance for the tests: readiness, catalog objects and a check.

Run with .venv-openstack's python by scripts/start-keystone.sh,
scripts/start-placement.sh, scripts/start-glance.sh and
scripts/check-openstack-services.sh:

    openstack-services.py wait URL SECONDS keystone|placement|glance
    openstack-services.py keystone-objects KEYSTONE_URL ACCEL_API_URL
    openstack-services.py placement-endpoint KEYSTONE_URL PLACEMENT_URL
    openstack-services.py image-endpoint KEYSTONE_URL GLANCE_URL
    openstack-services.py check KEYSTONE_URL [PLACEMENT_URL]

Plain HTTP against the v3 and Placement APIs (requests), so that what the scripts
create is exactly what is written here. Every creation looks first and keeps what
exists: the scripts run on every scripts/test.sh.
"""

import sys
import time
import uuid

import requests

REGION = "RegionOne"
DOMAIN = "default"
ADMIN = ("admin", "verso-admin", "admin")

PROJECTS = ["service", "demo", "other"]
ROLES = ["member", "reader", "service"]
# user -> (project, role); each password is verso-<user>.
USERS = {
    "accel": ("service", "admin"),
    "nova": ("service", "service"),
    "placement": ("service", "admin"),
    "glance": ("service", "admin"),
    "demo-member": ("demo", "member"),
    "demo-reader": ("demo", "reader"),
    "other-member": ("other", "member"),
}
SERVICES = {"accelerator": "accelerator", "placement": "placement"}
INTERFACES = ("public", "internal", "admin")
TIMEOUT = 30


class Failure(Exception):
    pass


def v3(url):
    """The v3 base URL whatever form the caller gave (with or without /v3)."""
    url = url.rstrip("/")
    return url if url.endswith("/v3") else url + "/v3"


def expect(resp, *codes):
    if resp.status_code not in codes:
        raise Failure(
            f"{resp.request.method} {resp.url}: {resp.status_code} "
            f"(wanted {codes}): {resp.text[:500]}"
        )
    return resp


def token(keystone, user, password, project):
    body = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {
                        "name": user,
                        "domain": {"id": DOMAIN},
                        "password": password,
                    }
                },
            },
            "scope": {"project": {"name": project, "domain": {"id": DOMAIN}}},
        }
    }
    resp = expect(
        requests.post(v3(keystone) + "/auth/tokens", json=body, timeout=TIMEOUT), 201
    )
    return resp.headers["X-Subject-Token"], resp.json()["token"]


class Keystone:
    def __init__(self, url):
        self.base = v3(url)
        self.session = requests.Session()
        tok, _ = token(url, *ADMIN)
        self.session.headers["X-Auth-Token"] = tok

    def get(self, path, **params):
        return expect(
            self.session.get(self.base + path, params=params, timeout=TIMEOUT), 200
        ).json()

    def post(self, path, body):
        return expect(
            self.session.post(self.base + path, json=body, timeout=TIMEOUT), 201
        ).json()

    def find_or_create(self, collection, key, name, body, **filters):
        """The object of that name (and filters), created from body if missing."""
        found = self.get("/" + collection, name=name, **filters)[collection]
        if found:
            return found[0], False
        return self.post("/" + collection, {key: body})[key], True

    def project(self, name):
        body = {"name": name, "domain_id": DOMAIN, "description": "verso tests"}
        return self.find_or_create("projects", "project", name, body, domain_id=DOMAIN)

    def role(self, name):
        return self.find_or_create("roles", "role", name, {"name": name})

    def user(self, name, password, project_id):
        body = {
            "name": name,
            "domain_id": DOMAIN,
            "password": password,
            "default_project_id": project_id,
        }
        return self.find_or_create("users", "user", name, body, domain_id=DOMAIN)

    def grant(self, project_id, user_id, role_id):
        # PUT of an assignment is idempotent in Keystone itself.
        path = f"/projects/{project_id}/users/{user_id}/roles/{role_id}"
        expect(self.session.put(self.base + path, timeout=TIMEOUT), 204)

    def service(self, name, kind):
        found = [
            s for s in self.get("/services", type=kind)["services"] if s["name"] == name
        ]
        if found:
            return found[0], False
        body = {"name": name, "type": kind, "description": "verso tests"}
        return self.post("/services", {"service": body})["service"], True

    def endpoints(self, service_id, url):
        """One endpoint per interface at url: missing ones created, moved ones updated."""
        existing = self.get("/endpoints", service_id=service_id)["endpoints"]
        changed = []
        for interface in INTERFACES:
            mine = [
                e
                for e in existing
                if e["interface"] == interface and e.get("region_id") == REGION
            ]
            if not mine:
                body = {
                    "service_id": service_id,
                    "interface": interface,
                    "region_id": REGION,
                    "url": url,
                }
                self.post("/endpoints", {"endpoint": body})
                changed.append(interface)
            elif mine[0]["url"] != url:
                path = f"/endpoints/{mine[0]['id']}"
                expect(
                    self.session.patch(
                        self.base + path,
                        json={"endpoint": {"url": url}},
                        timeout=TIMEOUT,
                    ),
                    200,
                )
                changed.append(interface)
        return changed


def wait(url, seconds, kind):
    """Polls url until the service of that kind answers (with a deadline)."""
    deadline = time.monotonic() + float(seconds)
    last = "no answer"
    while True:
        try:
            resp = requests.get(url, timeout=5)
            # Glance lists its versions with 300 Multiple Choices.
            body = resp.json() if resp.status_code in (200, 300) else {}
            if kind == "keystone" and body.get("version", {}).get("id", "").startswith(
                "v3"
            ):
                return
            if kind in ("placement", "glance") and body.get("versions"):
                return
            last = f"{resp.status_code}: {resp.text[:200]}"
        except (requests.RequestException, ValueError) as err:
            last = str(err)
        if time.monotonic() >= deadline:
            raise Failure(f"{kind} at {url} not ready after {seconds} s ({last})")
        time.sleep(0.25)


def keystone_objects(keystone_url, accel_url):
    ks = Keystone(keystone_url)
    created = []
    projects = {}
    for name in PROJECTS:
        projects[name], new = ks.project(name)
        created += [f"project {name}"] if new else []
    roles = {"admin": ks.role("admin")[0]}
    for name in ROLES:
        roles[name], new = ks.role(name)
        created += [f"role {name}"] if new else []
    for name, (project, role) in USERS.items():
        user, new = ks.user(name, f"verso-{name}", projects[project]["id"])
        created += [f"user {name}"] if new else []
        ks.grant(projects[project]["id"], user["id"], roles[role]["id"])
    services = {}
    for name, kind in SERVICES.items():
        services[name], new = ks.service(name, kind)
        created += [f"service {name}"] if new else []
    for interface in ks.endpoints(services["accelerator"]["id"], accel_url):
        created.append(f"accelerator {interface} endpoint at {accel_url}")
    print("keystone: " + ("new or changed: " + ", ".join(created) if created else "all objects there"))


def placement_endpoint(keystone_url, placement_url):
    ks = Keystone(keystone_url)
    service, _ = ks.service("placement", "placement")
    changed = ks.endpoints(service["id"], placement_url)
    if changed:
        print(f"placement: {', '.join(changed)} endpoints at {placement_url}")


def image_endpoint(keystone_url, glance_url):
    ks = Keystone(keystone_url)
    service, _ = ks.service("glance", "image")
    changed = ks.endpoints(service["id"], glance_url)
    if changed:
        print(f"glance: {', '.join(changed)} endpoints at {glance_url}")


def check_keystone(keystone_url):
    """A member's token, validated as the API will: with the accel service user's token."""
    member, body = token(keystone_url, "demo-member", "verso-demo-member", "demo")
    if body["project"]["name"] != "demo":
        raise Failure(f"demo-member's token is scoped to {body['project']}")
    accel, _ = token(keystone_url, "accel", "verso-accel", "service")
    resp = expect(
        requests.get(
            v3(keystone_url) + "/auth/tokens",
            headers={"X-Auth-Token": accel, "X-Subject-Token": member},
            timeout=TIMEOUT,
        ),
        200,
    )
    seen = resp.json()["token"]
    roles = sorted(r["name"] for r in seen["roles"])
    if seen["user"]["name"] != "demo-member" or seen["project"]["name"] != "demo":
        raise Failure(f"validated token is {seen['user']} in {seen['project']}")
    if "member" not in roles or "admin" in roles:
        raise Failure(f"demo-member's roles are {roles}")
    # A bad token must not validate.
    expect(
        requests.get(
            v3(keystone_url) + "/auth/tokens",
            headers={"X-Auth-Token": accel, "X-Subject-Token": member[:-4] + "AAAA"},
            timeout=TIMEOUT,
        ),
        404,
        401,
    )
    # The catalog names accel's API.
    types = {s["type"] for s in body["catalog"]}
    if "accelerator" not in types:
        raise Failure(f"catalog lacks accelerator: {sorted(types)}")
    print(f"check: keystone validated demo-member in demo with roles {roles}")


def check_placement(keystone_url, placement_url):
    tok, body = token(keystone_url, "placement", "verso-placement", "service")
    placements = [s for s in body["catalog"] if s["type"] == "placement"]
    urls = {e["url"].rstrip("/") for s in placements for e in s["endpoints"]}
    if urls != {placement_url.rstrip("/")}:
        raise Failure(f"catalog's placement endpoints are {sorted(urls)}")
    # Microversion 1.6+ for traits, 1.20 for the provider in the create response.
    headers = {
        "X-Auth-Token": tok,
        "OpenStack-API-Version": "placement 1.39",
    }
    base = placement_url.rstrip("/")
    s = requests.Session()
    s.headers.update(headers)
    # Anonymous callers are refused: auth_strategy is keystone.
    expect(requests.get(base + "/resource_providers", timeout=TIMEOUT), 401)

    trait = "CUSTOM_ACCEL_TEST"
    expect(s.put(f"{base}/traits/{trait}", timeout=TIMEOUT), 201, 204)
    rp_uuid = str(uuid.uuid4())
    name = f"verso-check-{rp_uuid[:8]}"
    rp = expect(
        s.post(
            base + "/resource_providers",
            json={"name": name, "uuid": rp_uuid},
            timeout=TIMEOUT,
        ),
        200,
    ).json()
    try:
        gen = rp["generation"]
        inv = {"resource_provider_generation": gen, "inventories": {"FPGA": {"total": 1}}}
        gen = expect(
            s.put(f"{base}/resource_providers/{rp_uuid}/inventories", json=inv, timeout=TIMEOUT),
            200,
        ).json()["resource_provider_generation"]
        traits = {"resource_provider_generation": gen, "traits": [trait]}
        expect(
            s.put(f"{base}/resource_providers/{rp_uuid}/traits", json=traits, timeout=TIMEOUT),
            200,
        )

        got = expect(s.get(f"{base}/resource_providers/{rp_uuid}", timeout=TIMEOUT), 200).json()
        if got["name"] != name or got["uuid"] != rp_uuid:
            raise Failure(f"read back provider {got}")
        invs = expect(
            s.get(f"{base}/resource_providers/{rp_uuid}/inventories", timeout=TIMEOUT), 200
        ).json()["inventories"]
        if list(invs) != ["FPGA"] or invs["FPGA"]["total"] != 1:
            raise Failure(f"read back inventories {invs}")
        got_traits = expect(
            s.get(f"{base}/resource_providers/{rp_uuid}/traits", timeout=TIMEOUT), 200
        ).json()["traits"]
        if got_traits != [trait]:
            raise Failure(f"read back traits {got_traits}")
        # The provider is found by what it offers, as Nova's scheduler asks.
        found = expect(
            s.get(
                base + "/resource_providers",
                params={"resources": "FPGA:1", "required": trait},
                timeout=TIMEOUT,
            ),
            200,
        ).json()["resource_providers"]
        if rp_uuid not in [p["uuid"] for p in found]:
            raise Failure(f"FPGA:1 with {trait} does not find {rp_uuid}: {found}")
    finally:
        expect(s.delete(f"{base}/resource_providers/{rp_uuid}", timeout=TIMEOUT), 204)
    expect(s.get(f"{base}/resource_providers/{rp_uuid}", timeout=TIMEOUT), 404)
    print(f"check: placement kept and deleted provider {rp_uuid} (FPGA 1, {trait})")


def main(argv):
    if len(argv) < 2:
        raise Failure(__doc__)
    cmd, args = argv[1], argv[2:]
    if cmd == "wait" and len(args) == 3:
        wait(*args)
    elif cmd == "keystone-objects" and len(args) == 2:
        keystone_objects(*args)
    elif cmd == "placement-endpoint" and len(args) == 2:
        placement_endpoint(*args)
    elif cmd == "image-endpoint" and len(args) == 2:
        image_endpoint(*args)
    elif cmd == "check" and len(args) in (1, 2):
        check_keystone(args[0])
        if len(args) == 2:
            check_placement(*args)
    else:
        raise Failure(__doc__)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except (Failure, requests.RequestException, KeyError, ValueError) as err:
        print(f"{sys.argv[1] if len(sys.argv) > 1 else 'openstack-services'}: {err}", file=sys.stderr)
        sys.exit(1)
