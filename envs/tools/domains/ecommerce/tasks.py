"""The shop's task templates: entity pools and pickers, and the templates that need code.

The templates that differ only in data are recipes in ``tasks.json``; see
:mod:`agentgym.envs.tools.taskgen` for how both become tasks.
"""

from __future__ import annotations

from typing import Any

from agentgym.envs.tools.backend import Domain, Task
from agentgym.envs.tools.backend import id_number as _num
from agentgym.envs.tools.domains.ecommerce.backend import days_between
from agentgym.envs.tools.domains.ecommerce.tools import (
    CANCEL_REASONS,
    CATEGORIES,
    ORDER_STATUSES,
    REFUND_REASONS,
    SPEEDS,
)
from agentgym.envs.tools.taskgen import Draft, Drawing, TaskGen, draw_tasks, fact, load_recipes

DRAWING = Drawing(type_seed=7919)
"""One rng per type; the first template (from the k-th on) that fits gives the k-th task."""


def generate(domain: Domain, state: dict[str, Any], seed: int, per_type: int) -> list[Task]:
    """``per_type`` shop tasks of each type for the initial ``state``, seeded by ``seed``."""
    return draw_tasks(EcommerceTasks(domain, state), seed, per_type, DRAWING)


class EcommerceTasks(TaskGen):
    """Task templates over one initial shop state."""

    def __init__(self, domain: Domain, state: dict[str, Any]) -> None:
        """Index the state's orders, users, carts, refunds and products."""
        super().__init__(domain, state, load_recipes(__package__ or __name__))
        orders = sorted(state["orders"].values(), key=lambda o: _num(o["order_id"]))
        self.by_status = {
            s: [o["order_id"] for o in orders if o["status"] == s] for s in ORDER_STATUSES
        }
        self.refundable = [
            o["order_id"]
            for o in orders
            if o["status"] == "delivered"
            and days_between(o["shipping"]["delivered_date"], state["today"])
            <= state["return_window_days"]
        ]
        self.users = sorted(state["users"], key=_num)
        self.cart_users = [u for u in self.users if state["carts"][u]]
        self.refunds = sorted(state["refunds"], key=_num)
        self.products = sorted(state["products"], key=_num)
        self.pools.update(
            users=self.users,
            products=self.products,
            orders=sorted(state["orders"], key=_num),
            placed=self.by_status["placed"],
            shipped_or_placed=self.by_status["shipped"] + self.by_status["placed"],
            refundable=self.refundable,
            refunds=self.refunds,
            cart_users=self.cart_users,
            cart_user_pool=self.cart_users or self.users,
            speeds=SPEEDS,
            cancel_reasons=CANCEL_REASONS,
            refund_reasons=REFUND_REASONS,
        )

    # ------------------------------------------------------------------- pickers

    def room(self, st: dict[str, Any], uid: str, pid: str) -> int:
        """How many more units of ``pid`` fit in ``uid``'s cart (capped at 3)."""
        have = sum(x["quantity"] for x in st["carts"][uid] if x["product_id"] == pid)
        return int(min(3, st["products"][pid]["stock"] - have))

    def addable(self, uid: str) -> tuple[str, int] | None:
        """A product that fits in ``uid``'s cart and a quantity of it, or None."""
        pids = [p for p in self.products if self.room(self.state, uid, p) >= 1]
        if not pids:
            return None
        pid = self.rng.choice(pids)
        return pid, self.rng.randint(1, self.room(self.state, uid, pid))

    def cart_product(self, uid: str) -> str:
        """A product in ``uid``'s cart."""
        return str(self.rng.choice([x["product_id"] for x in self.state["carts"][uid]]))

    def other_user(self, uid: str) -> str:
        """A user other than ``uid``."""
        return str(self.rng.choice([u for u in self.users if u != uid]))

    def _cart_user(self) -> str:
        """A user with a non-empty cart (any user when every cart is empty)."""
        return str(self.rng.choice(self.cart_users or self.users))

    def _pick_id(self, items: list[str]) -> str | None:
        found = self.pick(items)
        return None if found is None else str(found)

    # ------------------------------------------------------------------- single and multiple

    def s_search(self) -> Draft | None:
        """Search one category under a price cap, cheapest or best rated first."""
        cat = self.rng.choice(CATEGORIES)
        prices = sorted(p["price"] for p in self.state["products"].values() if p["category"] == cat)
        if not prices:
            return None
        cap = int(self.rng.choice(prices)) + 1
        sort = self.rng.choice(("price_asc", "rating_desc"))
        r = self.run.one("search_products", {"category": cat, "max_price": cap, "sort": sort})
        order = "cheapest first" if sort == "price_asc" else "best rated first"
        top = r["results"][0]
        return Draft(
            f"Show me products in the {cat} category that cost at most ${cap}, {order}.",
            [top["name"], fact(top["price"])],
        )

    def s_list(self) -> Draft | None:
        """List a user's orders, all or of one status."""
        uid = self.rng.choice(self.users)
        status = self.rng.choice((None, *ORDER_STATUSES))
        args: dict[str, Any] = {"user_id": uid}
        if status is not None:
            args["status"] = status
        r = self.run.one("list_orders", args)
        if not r["orders"]:
            return None
        which = "all my orders" if status is None else f"my {status} orders"
        return Draft(
            f"I'm customer {uid}. List {which}, please.",
            [row["order_id"] for row in r["orders"][:3]],
        )

    def m_cart_options(self) -> Draft | None:
        """A cart's subtotal and every shipping option to its owner."""
        uid = self._cart_user()
        r1 = self.run.one("view_cart", user_id=uid)
        r2 = self.run.one("get_shipping_options", user_id=uid)
        cheapest = min(r2["options"], key=lambda o: o["cost"])
        return Draft(
            f"For user {uid}: show my cart's subtotal and all shipping options to my address.",
            [fact(r1["subtotal"]), fact(cheapest["cost"]), r2["options"][-1]["carrier"]],
        )

    # ------------------------------------------------------------------- parallel

    def p_add_users(self) -> Draft | None:
        """Add to two or three users' carts at once."""
        uids = self.rng.sample(self.users, self.rng.randint(2, 3))
        calls, parts = [], []
        for uid in uids:
            got = self.addable(uid)
            if got is None:
                return None
            pid, qty = got
            calls.append(("add_to_cart", {"user_id": uid, "product_id": pid, "quantity": qty}))
            parts.append(f"{qty} of {pid} to {uid}'s cart")
        results = self.run.turn(*calls)
        return Draft(
            "At the same time, add " + "; ".join(parts) + ". Report each cart's subtotal.",
            [fact(r["subtotal"]) for r in results],
        )

    def p_products(self) -> Draft | None:
        """Compare two to four products' prices."""
        pids = sorted(self.rng.sample(self.products, self.rng.randint(2, 4)), key=_num)
        results = self.run.turn(*[("get_product", {"product_id": p}) for p in pids])
        return Draft(
            f"Compare the prices of products {', '.join(pids[:-1])} and {pids[-1]}.",
            [fact(r["price"]) for r in results[:3]],
        )

    def p_cancel_track(self) -> Draft | None:
        """Cancel one order while tracking another."""
        oid = self._pick_id(self.by_status["placed"])
        other = self._pick_id([o for o in self.by_status["shipped"] if o != oid])
        if oid is None or other is None:
            return None
        reason = self.rng.choice(CANCEL_REASONS)
        r1, r2 = self.run.turn(
            ("cancel_order", {"order_id": oid, "reason": reason}),
            ("track_shipment", {"order_id": other}),
        )
        return Draft(
            f"Cancel order {oid} ({self.tables['cancel_words'][reason]}) and, meanwhile, tell "
            f"me where order {other} is.",
            [fact(r1["refund_amount"]), r2["last_location"], r2["estimated_delivery"]],
        )

    def p_tracks(self) -> Draft | None:
        """Delivery dates of two or three orders in transit or awaiting shipping."""
        pool = self.by_status["shipped"] + self.by_status["placed"]
        if len(pool) < 2:
            return None
        oids = sorted(self.rng.sample(pool, min(len(pool), self.rng.randint(2, 3))), key=_num)
        results = self.run.turn(*[("track_shipment", {"order_id": o}) for o in oids])
        return Draft(
            f"When will orders {', '.join(oids[:-1])} and {oids[-1]} arrive?",
            [r["estimated_delivery"] for r in results],
        )

    def p_orders(self) -> Draft | None:
        """Totals of two or three orders."""
        everything = sorted(self.state["orders"], key=_num)
        oids = sorted(self.rng.sample(everything, self.rng.randint(2, 3)), key=_num)
        results = self.run.turn(*[("get_order", {"order_id": o}) for o in oids])
        return Draft(
            f"What are the totals of orders {', '.join(oids[:-1])} and {oids[-1]}?",
            [fact(r["total"]) for r in results],
        )

    # ------------------------------------------------------------------- dependent

    def _deliver_user(self) -> str | None:
        """A user whose latest delivered order can still be refunded."""
        fits = []
        for uid in self.users:
            rows = self.domain.call(
                self.state, "list_orders", {"user_id": uid, "status": "delivered"}
            )
            if rows["orders"] and rows["orders"][0]["order_id"] in self.refundable:
                fits.append(uid)
        return self._pick_id(fits)

    def _status_user(self, status: str) -> str | None:
        owners = {str(self.state["orders"][o]["user_id"]) for o in self.by_status[status]}
        return self._pick_id(sorted(owners, key=_num))

    def _list_then(self, uid: str, status: str, follow: list[tuple[str, dict[str, Any]]]) -> None:
        """Run list_orders(uid, status), then calls on its newest order.

        In the follow-up arguments ``"$o"`` stands for that order's id and ``"$r"`` for the
        refund id of the previous result.
        """
        rows = self.run.one("list_orders", user_id=uid, status=status)
        oid = rows["orders"][0]["order_id"]
        for name, args in follow:
            last = self.run.results[-1]
            real = {
                k: oid if v == "$o" else last["refund_id"] if v == "$r" else v
                for k, v in args.items()
            }
            self.run.one(name, real)

    def d_search_add(self) -> Draft | None:
        """Find the best-rated product of a kind and add some to a cart."""
        uid = self.rng.choice(self.users)
        carts, products = self.state["carts"], self.state["products"].values()
        nouns = sorted(
            {
                p["name"].split()[-1].lower()
                for p in products
                if p["stock"]
                - sum(x["quantity"] for x in carts[uid] if x["product_id"] == p["product_id"])
                >= 1
            }
        )
        noun = self.pick(nouns)
        if noun is None:
            return None
        st = self.run.state
        a1 = {"query": noun, "sort": "rating_desc", "in_stock_only": True, "limit": 1}
        r1 = self.run.one("search_products", a1)
        pid = r1["results"][0]["product_id"]
        if self.room(st, uid, pid) < 1:
            return None
        qty = self.rng.randint(1, self.room(st, uid, pid))
        r2 = self.run.one("add_to_cart", user_id=uid, product_id=pid, quantity=qty)
        return Draft(
            f"I'm user {uid}. Find the best-rated {noun} you have in stock and add {qty} of it "
            "to my cart.",
            [r1["results"][0]["name"], fact(r2["subtotal"])],
        )

    def d_cheapest_details(self) -> Draft | None:
        """The cheapest product of a category, then its stock."""
        cat = self.rng.choice(CATEGORIES)
        r1 = self.run.one("search_products", category=cat, sort="price_asc", limit=1)
        if not r1["results"]:
            return None
        r2 = self.run.one("get_product", product_id=r1["results"][0]["product_id"])
        return Draft(
            f"What is the cheapest item in the {cat} category? How many are left in stock?",
            [r2["name"], fact(r2["price"]), str(r2["stock"])],
        )

    def d_list_cancel(self) -> Draft | None:
        """Cancel a user's newest unshipped order, found by listing."""
        uid = self._status_user("placed")
        if uid is None:
            return None
        reason = self.rng.choice(CANCEL_REASONS)
        self._list_then(uid, "placed", [("cancel_order", {"order_id": "$o", "reason": reason})])
        r = self.run.results[-1]
        return Draft(
            f"User {uid} here: cancel my most recent order that hasn't shipped yet, "
            f"{self.tables['cancel_words'][reason]}.",
            [r["order_id"], fact(r["refund_amount"])],
        )

    def d_list_track(self) -> Draft | None:
        """Track a user's newest shipped order, found by listing."""
        uid = self._status_user("shipped")
        if uid is None:
            return None
        self._list_then(uid, "shipped", [("track_shipment", {"order_id": "$o"})])
        r = self.run.results[-1]
        return Draft(
            f"I'm {uid}. Where is my most recent order that has shipped, and when will it arrive?",
            [r["carrier"], r["last_location"], r["estimated_delivery"]],
        )

    def d_list_refund(self) -> Draft | None:
        """Refund a user's latest delivered order, found by listing."""
        uid = self._deliver_user()
        if uid is None:
            return None
        reason = self.rng.choice(REFUND_REASONS)
        self._list_then(
            uid, "delivered", [("request_refund", {"order_id": "$o", "reason": reason})]
        )
        r = self.run.results[-1]
        return Draft(
            f"I'm user {uid}. I'd like a refund for my latest delivered order: "
            f"{self.tables['refund_words'][reason]}.",
            [r["refund_id"], fact(r["amount"])],
        )

    def d_refund_status(self) -> Draft | None:
        """Refund an order, then look the refund up."""
        oid = self.pick(self.refundable)
        if oid is None:
            return None
        reason = self.rng.choice(REFUND_REASONS)
        r1 = self.run.one("request_refund", order_id=oid, reason=reason)
        r2 = self.run.one("get_refund", refund_id=r1["refund_id"])
        return Draft(
            f"Please refund order {oid} ({self.tables['refund_words'][reason]}) and then look "
            "up the refund to tell me when the money will be credited.",
            [r2["refund_id"], r2["expected_credit_date"]],
        )

    def d_place_track(self) -> Draft | None:
        """Check out a cart, then track the new order."""
        uid = self.pick(self.cart_users)
        if uid is None:
            return None
        speed = self.rng.choice(SPEEDS)
        r1 = self.run.one("place_order", user_id=uid, shipping_speed=speed)
        r2 = self.run.one("track_shipment", order_id=r1["order_id"])
        return Draft(
            f"I'm {uid}. Check out my cart with {speed} shipping, then give me "
            "the tracking number of the new order.",
            [r1["order_id"], r2["tracking_number"], fact(r1["total"])],
        )

    def d_search_detail_add(self) -> Draft | None:
        """The dearest in-stock product of a category: its rating, then one in a cart."""
        cat = self.rng.choice(CATEGORIES)
        uid = self.rng.choice(self.users)
        a1 = {"category": cat, "sort": "price_desc", "in_stock_only": True, "limit": 1}
        r1 = self.run.one("search_products", a1)
        if not r1["results"]:
            return None
        pid = r1["results"][0]["product_id"]
        r2 = self.run.one("get_product", product_id=pid)
        if self.room(self.run.state, uid, pid) < 1:
            return None
        r3 = self.run.one("add_to_cart", user_id=uid, product_id=pid, quantity=1)
        return Draft(
            f"Find the most expensive in-stock {cat} product, check its rating, and add one to "
            f"the cart of user {uid}.",
            [r2["name"], fact(r2["rating"]), fact(r3["subtotal"])],
        )

    def d_list_get_cancel(self) -> Draft | None:
        """Look up a user's newest unshipped order, then cancel it."""
        uid = self._status_user("placed")
        if uid is None:
            return None
        reason = self.rng.choice(CANCEL_REASONS)
        follow = [
            ("get_order", {"order_id": "$o"}),
            ("cancel_order", {"order_id": "$o", "reason": reason}),
        ]
        self._list_then(uid, "placed", follow)
        _, r2, r3 = self.run.results
        return Draft(
            f"I'm {uid}. Look up what's in my newest unshipped order, then cancel it: "
            f"{self.tables['cancel_words'][reason]}.",
            [r2["order_id"], r2["items"][0]["name"], fact(r3["refund_amount"])],
        )

    def d_list_refund_status(self) -> Draft | None:
        """Refund a user's latest delivered order, then check the refund."""
        uid = self._deliver_user()
        if uid is None:
            return None
        reason = self.rng.choice(REFUND_REASONS)
        follow = [
            ("request_refund", {"order_id": "$o", "reason": reason}),
            ("get_refund", {"refund_id": "$r"}),
        ]
        self._list_then(uid, "delivered", follow)
        _, r2, r3 = self.run.results
        return Draft(
            f"User {uid}: refund my most recent delivered order "
            f"({self.tables['refund_words'][reason]}) and then check that refund's status.",
            [r2["refund_id"], r3["status"], r3["expected_credit_date"]],
        )
