"""Three small worlds the read-heavy scenarios play out in: orders, files and wiki search.

Variants of one shape rotate through the domains, so the same loop appears with different tool
names, argument shapes and outputs (a customer-service agent spinning on ``search_orders``, a
coding agent on ``grep``, a research agent on ``wiki_search``). Every domain offers an endless
stream of *distinct* reads: each call has new arguments and returns new output, which is what
"progress" looks like to a detector.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple


class Call(NamedTuple):
    """A tool call as a scenario script sees it: name, arguments and what came back."""

    tool: str
    args: dict[str, Any]
    output: Any


@dataclass(frozen=True)
class Domain:
    """One episode's world.

    Attributes:
        name: ``orders``, ``files`` or ``wiki``.
        task_type: The Episode format's task type (docs/episode-format.md) of work in this domain.
        task: The user's request.
        answer: A final answer that fits the task.
        search: The domain's most natural search call (the one agents spin on).
        reads: Endless distinct reads: no two share arguments or output.
    """

    name: str
    task_type: str
    task: str
    answer: str
    search: Call
    reads: Iterator[Call]


_PEOPLE = ("Ana Souza", "Kenji Mori", "Lena Fischer", "Omar Haddad", "Priya Nair", "Tom Reyes")
_CITIES = ("Leipzig", "Lyon", "Porto", "Brno", "Gdansk", "Utrecht", "Bilbao")
_PRODUCTS = ("trail shoes", "desk lamp", "espresso grinder", "rain jacket", "usb-c dock")


def _orders(rng: random.Random) -> Domain:
    person = rng.choice(_PEOPLE)
    customer = f"C-{rng.randint(10000, 99999)}"
    order0 = rng.randint(400000, 899999)

    def reads() -> Iterator[Call]:
        yield Call(
            "get_customer",
            {"customer_id": customer},
            {"customer_id": customer, "name": person, "tier": "gold", "open_orders": 2},
        )
        for k in itertools.count():
            order, sku = f"ORD-{order0 + 37 * k}", f"SKU-{1000 + 13 * k}"
            tracking = f"1Z{order0 % 9999:04d}{k:04d}"
            city = _CITIES[k % len(_CITIES)]
            yield from (
                Call(
                    "get_order",
                    {"order_id": order},
                    {
                        "order_id": order,
                        "status": ("shipped", "delivered", "packed")[k % 3],
                        "items": [sku],
                        "total": round(19.9 + 7.5 * k, 2),
                        "tracking_number": tracking,
                    },
                ),
                Call(
                    "get_shipment",
                    {"tracking_number": tracking},
                    {
                        "tracking_number": tracking,
                        "carrier": "UPS",
                        "last_scan": city,
                        "eta": f"2025-03-{10 + k % 18:02d}",
                    },
                ),
                Call(
                    "check_inventory",
                    {"sku": sku, "warehouse": f"W{k % 4 + 1}"},
                    {"sku": sku, "warehouse": f"W{k % 4 + 1}", "available": 3 * k + 1},
                ),
                Call(
                    "list_returns",
                    {"customer_id": customer, "since": f"2024-{k % 12 + 1:02d}"},
                    {"returns": [{"order_id": order, "reason": "wrong size"}] if k % 2 else []},
                ),
            )

    product = rng.choice(_PRODUCTS)
    return Domain(
        name="orders",
        task_type="lookup",
        task=f"{person} ({customer}) asks where the {product} they ordered is and when it "
        "will arrive.",
        answer=f"{person}'s {product} shipped with UPS and is due on the date shown by the "
        "latest scan; no return or stock issue is blocking it.",
        search=Call(
            "search_orders",
            {"q": f"customer:{customer} {product}", "limit": 5},
            {"results": [{"order_id": f"ORD-{order0}", "status": "shipped"}], "total": 1},
        ),
        reads=reads(),
    )


_MODULES = ("billing", "cart", "auth", "search", "notify", "report")
_FUNCS = ("apply_discount", "compute_total", "parse_token", "rank_hits", "send_digest")
_SNIPPETS = (
    "def {name}(items):\n    total = sum(i.price * i.qty for i in items)\n"
    "    return round(total, 2)\n",
    "class {name}Config:\n    timeout_s = {n}\n    retries = 3\n    backoff = 'exponential'\n",
    "import logging\nlog = logging.getLogger(__name__)\n\ndef {name}(event):\n"
    "    log.info('handling %s', event.kind)\n",
    "@dataclass\nclass {name}:\n    id: str\n    amount: Decimal\n    currency: str = 'EUR'\n",
    "def {name}(token: str) -> bool:\n    header, _, signature = token.partition('.')\n"
    "    return verify(header, signature)\n",
    'QUERY = """\nSELECT id, score FROM hits WHERE q = :q ORDER BY score DESC LIMIT {n}\n"""\n',
)
_COMMITS = (
    "fix off-by-one in pagination",
    "round once at the end",
    "add retry to webhook sender",
    "rename currency field",
    "bump timeout for slow gateways",
    "log event kinds",
)


def _files(rng: random.Random) -> Domain:
    func = rng.choice(_FUNCS)
    module = rng.choice(_MODULES)
    test = f"tests/test_{module}.py::test_{func}_rounding"

    def reads() -> Iterator[Call]:
        yield Call(
            "list_dir",
            {"path": f"src/{module}"},
            "\n".join(
                f"src/{module}/{name}.py" for name in ("__init__", "core", "models", "rules")
            ),
        )
        for k in itertools.count():
            mod = _MODULES[(k + 1) % len(_MODULES)]
            path = f"src/{mod}/{('core', 'models', 'rules')[k % 3]}{k // 3 or ''}.py"
            name = f"{mod}_{_FUNCS[k % len(_FUNCS)]}"
            code = _SNIPPETS[k % len(_SNIPPETS)].format(name=name, n=10 * (k + 1))
            commit = _COMMITS[k % len(_COMMITS)]
            yield from (
                Call("read_file", {"path": path}, f"# {path}\n{code}"),
                Call(
                    "grep",
                    {"pattern": f"{name}\\(", "path": "src/"},
                    f"src/{module}/core.py:{40 + 7 * k}:    result = {name}(payload)",
                ),
                Call(
                    "git_log",
                    {"path": path, "n": 3},
                    f"{rng.getrandbits(28):07x} {commit} ({k + 2} days ago)",
                ),
            )

    return Domain(
        name="files",
        task_type="coding",
        task=f"The test {test} fails. Find the cause and explain the fix.",
        answer=f"{func} rounds before summing; quantizing once at the end fixes {test}.",
        search=Call(
            "grep",
            {"pattern": f"def {func}", "path": "src/"},
            f"src/{module}/core.py:42:def {func}(order, code):",
        ),
        reads=reads(),
    )


_TOPICS = (
    "the Antikythera mechanism",
    "the Voyager golden record",
    "the Svalbard seed vault",
    "the Rosetta stone",
    "the Tunguska event",
    "the Bayeux tapestry",
)
_ASPECTS = (
    "origin",
    "discovery",
    "key researchers",
    "construction",
    "dating methods",
    "controversies",
    "current location",
    "restoration",
    "public access",
    "replicas",
    "funding",
    "media coverage",
)
_FACTS = (
    "First described in {year} by a team from {place}.",
    "A {n}-page survey published in {year} is the standard reference.",
    "Critics in {place} disputed the early accounts for decades.",
    "Funding came mostly from private donors after {year}.",
    "About {n} thousand visitors a year see it in {place}.",
    "Radiocarbon results point to a date near {year}.",
    "Three full replicas exist; the best is kept in {place}.",
    "The {year} conference settled the naming question.",
)
_PLACES = ("Athens", "Oslo", "London", "Pasadena", "Tomsk", "Bayeux", "Cairo", "Uppsala")


def _wiki(rng: random.Random) -> Domain:
    topic = rng.choice(_TOPICS)
    slug = topic.removeprefix("the ").replace(" ", "_").title()

    def fact(template: str) -> str:
        return template.format(
            year=rng.randint(1850, 2020), place=rng.choice(_PLACES), n=rng.randint(12, 900)
        )

    def reads() -> Iterator[Call]:
        aspects = list(_ASPECTS)
        rng.shuffle(aspects)
        for k in itertools.count():
            aspect = aspects[k % len(aspects)] + (f" {1990 + k}" if k >= len(aspects) else "")
            places = rng.sample(_PLACES, 2)
            text = " ".join(fact(template) for template in rng.sample(_FACTS, 2))
            yield from (
                Call(
                    "wiki_search",
                    {"query": f"{topic} {aspect}", "limit": 5},
                    {
                        "results": [
                            f"{slug} ({aspect})",
                            f"{places[0]} museum",
                            f"{places[1]} archive",
                        ],
                        "hits": rng.randint(3, 400),
                    },
                ),
                Call("wiki_page", {"title": slug, "section": aspect}, f"{aspect.title()}: {text}"),
            )

    return Domain(
        name="wiki",
        task_type="research",
        task=f"Write a short brief on {topic}: origin, key people and where it is today, "
        "with sources.",
        answer=f"Brief on {topic}: origin, the main researchers and its current status, "
        "each point cited from the sections read.",
        search=Call(
            "wiki_search",
            {"query": topic, "limit": 5},
            {"results": [slug, f"{slug} (disambiguation)"], "hits": 312},
        ),
        reads=reads(),
    )


DOMAINS: dict[str, Callable[[random.Random], Domain]] = {
    "orders": _orders,
    "files": _files,
    "wiki": _wiki,
}


def pick_domain(rng: random.Random, variant: int) -> Domain:
    """The domain for ``variant``: variants rotate orders, files, wiki."""
    factories = list(DOMAINS.values())
    return factories[variant % len(factories)](rng)


def take(domain: Domain, n: int) -> list[Call]:
    """The next ``n`` distinct reads of ``domain``."""
    return list(itertools.islice(domain.reads, n))
