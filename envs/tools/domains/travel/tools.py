"""The travel vocabulary and its 12 tools: names, JSON schemas, descriptions and latencies."""

from __future__ import annotations

from datetime import date

from agentgym.envs.tools.backend import Tool
from agentgym.envs.tools.taskgen import array, integer, number, obj, string

FIRST_DAY = date(2027, 3, 1)
LAST_DAY = date(2027, 3, 31)
MAX_NIGHTS = 14

AIRPORTS = {
    "ATL": "Atlanta",
    "BOS": "Boston",
    "CDG": "Paris",
    "DEN": "Denver",
    "JFK": "New York",
    "LAX": "Los Angeles",
    "LHR": "London",
    "MIA": "Miami",
    "ORD": "Chicago",
    "SEA": "Seattle",
}
CITIES = sorted(AIRPORTS.values())
CABINS = ("economy", "premium_economy", "business")
CABIN_WORDS = {"economy": "economy", "premium_economy": "premium economy", "business": "business"}
PAYMENT_METHODS = ("visa", "mastercard", "amex", "paypal")
BOOKING_STATUSES = ("pending_payment", "paid", "cancelled")
AMENITIES = ("breakfast", "gym", "parking", "pool", "spa", "wifi")
TIERS = ("none", "silver", "gold")

_FLIGHT_ID = string("Flight id, e.g. 'f12'.", pattern="^f[0-9]+$")
_HOTEL_ID = string("Hotel id, e.g. 'h7'.", pattern="^h[0-9]+$")
_TRAVELLER_ID = string("Saved traveller id, e.g. 't3'.", pattern="^t[0-9]+$")
_BOOKING_ID = string("Booking id, e.g. 'b14'.", pattern="^b[0-9]+$")
_PAYMENT_ID = string("Payment id, e.g. 'pay5'.", pattern="^pay[0-9]+$")
_AIRPORT = string("IATA airport code, e.g. 'JFK'.", pattern="^[A-Z]{3}$")
_CABIN = string("Cabin class.", enum=list(CABINS))
_DATE = string("Date as YYYY-MM-DD (March 2027).", format="date")
_METHOD = string("Payment method.", enum=list(PAYMENT_METHODS))
_STATUS = string("Booking status.", enum=list(BOOKING_STATUSES))
_PRICE = number("Price in USD.", minimum=0)
_SEATS = integer("Seats still available.", minimum=0)
_ROOMS_LEFT = integer("Rooms still available.", minimum=0)
_TIME = string("Local time as HH:MM.", pattern="^[0-9]{2}:[0-9]{2}$")

_FLIGHT_VIEW = obj(
    {
        "flight_id": _FLIGHT_ID,
        "airline": string("Airline name."),
        "flight_number": string("Flight number, e.g. 'AU412'."),
        "origin": _AIRPORT,
        "origin_city": string("City of the origin airport."),
        "destination": _AIRPORT,
        "destination_city": string("City of the destination airport."),
        "date": _DATE,
        "depart": _TIME,
        "arrive": _TIME,
        "duration_min": integer("Flight time in minutes.", minimum=1),
        "cabins": {
            "type": "object",
            "description": "Price and seats left per cabin class.",
            "properties": {c: obj({"price": _PRICE, "seats_left": _SEATS}) for c in CABINS},
            "required": list(CABINS),
            "additionalProperties": False,
        },
    }
)
_FLIGHT_HIT = obj(
    {
        "flight_id": _FLIGHT_ID,
        "airline": string("Airline name."),
        "flight_number": string("Flight number."),
        "depart": _TIME,
        "arrive": _TIME,
        "duration_min": integer("Flight time in minutes.", minimum=1),
        "cabin": _CABIN,
        "price": _PRICE,
        "seats_left": _SEATS,
    }
)
_HOTEL_VIEW = obj(
    {
        "hotel_id": _HOTEL_ID,
        "name": string("Hotel name."),
        "city": string("City.", enum=CITIES),
        "stars": integer("Star rating.", minimum=1, maximum=5),
        "price_per_night": _PRICE,
        "rooms_available": _ROOMS_LEFT,
        "amenities": array(string("Amenity.", enum=list(AMENITIES)), "Amenities, sorted."),
    }
)
_HOTEL_HIT = obj(
    {
        "hotel_id": _HOTEL_ID,
        "name": string("Hotel name."),
        "stars": integer("Star rating.", minimum=1, maximum=5),
        "price_per_night": _PRICE,
        "total_price": number("Price of one room for the whole stay.", minimum=0),
        "rooms_available": _ROOMS_LEFT,
    }
)
_BOOKING_VIEW = obj(
    {
        "booking_id": _BOOKING_ID,
        "kind": string("What is booked.", enum=["flight", "hotel"]),
        "traveller_id": _TRAVELLER_ID,
        "status": _STATUS,
        "total": _PRICE,
        "payment_id": {"type": ["string", "null"], "description": "Payment id once paid."},
        "flight_id": _FLIGHT_ID,
        "cabin": _CABIN,
        "origin": _AIRPORT,
        "destination": _AIRPORT,
        "date": _DATE,
        "hotel_id": _HOTEL_ID,
        "city": string("Hotel city.", enum=CITIES),
        "check_in": _DATE,
        "check_out": _DATE,
        "nights": integer("Nights of the stay.", minimum=1),
        "rooms": integer("Rooms booked.", minimum=1),
    },
    required=["booking_id", "kind", "traveller_id", "status", "total", "payment_id"],
)
_PAYMENT_VIEW = obj(
    {
        "payment_id": _PAYMENT_ID,
        "booking_id": _BOOKING_ID,
        "method": _METHOD,
        "amount": _PRICE,
        "status": string("Payment status.", enum=["captured", "refunded"]),
    }
)
_TRAVELLER_VIEW = obj(
    {
        "traveller_id": _TRAVELLER_ID,
        "name": string("Full name."),
        "email": string("Email address.", format="email"),
        "home_airport": _AIRPORT,
        "loyalty_tier": string("Loyalty tier.", enum=list(TIERS)),
    }
)

TOOLS = (
    Tool(
        "search_flights",
        "Search flights on one route and date; lists each flight with the price and seats left "
        "in the chosen cabin.",
        obj(
            {
                "origin": string("Departure airport code, e.g. 'JFK'.", pattern="^[A-Z]{3}$"),
                "destination": string("Arrival airport code, e.g. 'LHR'.", pattern="^[A-Z]{3}$"),
                "date": string("Departure date as YYYY-MM-DD.", format="date"),
                "cabin": _CABIN,
                "sort_by": string(
                    "Order of the results (default: departure).", enum=["departure", "price"]
                ),
            },
            required=["origin", "destination", "date", "cabin"],
        ),
        obj(
            {
                "flights": array(_FLIGHT_HIT, "Matching flights."),
                "count": integer("Number of flights.", minimum=0),
            }
        ),
        latency_ms=180.0,
    ),
    Tool(
        "get_flight",
        "Get one flight's schedule, route, and prices and seats left in every cabin.",
        obj({"flight_id": _FLIGHT_ID}),
        _FLIGHT_VIEW,
        latency_ms=70.0,
    ),
    Tool(
        "search_hotels",
        "Search hotels in a city for a stay (check-in to check-out), cheapest first.",
        obj(
            {
                "city": string("City to stay in.", enum=CITIES),
                "check_in": string("Check-in date as YYYY-MM-DD.", format="date"),
                "check_out": string("Check-out date as YYYY-MM-DD.", format="date"),
                "max_price": number("Highest price per night in USD.", minimum=1, maximum=5000),
                "min_stars": integer("Lowest star rating.", minimum=1, maximum=5),
            },
            required=["city", "check_in", "check_out"],
        ),
        obj(
            {
                "hotels": array(_HOTEL_HIT, "Matching hotels, cheapest first."),
                "nights": integer("Nights of the stay.", minimum=1),
                "count": integer("Number of hotels.", minimum=0),
            }
        ),
        latency_ms=160.0,
    ),
    Tool(
        "get_hotel",
        "Get one hotel's details: city, stars, nightly price, rooms available, amenities.",
        obj({"hotel_id": _HOTEL_ID}),
        _HOTEL_VIEW,
        latency_ms=60.0,
    ),
    Tool(
        "book_flight",
        "Book one seat on a flight for a saved traveller; the booking awaits payment.",
        obj({"flight_id": _FLIGHT_ID, "traveller_id": _TRAVELLER_ID, "cabin": _CABIN}),
        obj(
            {
                "booking_id": _BOOKING_ID,
                "status": _STATUS,
                "flight_id": _FLIGHT_ID,
                "cabin": _CABIN,
                "total": _PRICE,
                "seats_left": _SEATS,
            }
        ),
        writes=True,
        latency_ms=320.0,
    ),
    Tool(
        "book_hotel",
        "Book hotel rooms for a saved traveller's stay; the booking awaits payment.",
        obj(
            {
                "hotel_id": _HOTEL_ID,
                "traveller_id": _TRAVELLER_ID,
                "check_in": string("Check-in date as YYYY-MM-DD.", format="date"),
                "check_out": string("Check-out date as YYYY-MM-DD.", format="date"),
                "rooms": integer("Number of rooms.", minimum=1, maximum=4),
            }
        ),
        obj(
            {
                "booking_id": _BOOKING_ID,
                "status": _STATUS,
                "hotel_id": _HOTEL_ID,
                "nights": integer("Nights of the stay.", minimum=1),
                "rooms": integer("Rooms booked.", minimum=1),
                "total": _PRICE,
                "rooms_left": _ROOMS_LEFT,
            }
        ),
        writes=True,
        latency_ms=300.0,
    ),
    Tool(
        "list_bookings",
        "List a saved traveller's bookings, optionally only those with one status.",
        obj(
            {"traveller_id": _TRAVELLER_ID, "status": _STATUS},
            required=["traveller_id"],
        ),
        obj(
            {
                "traveller_id": _TRAVELLER_ID,
                "bookings": array(_BOOKING_VIEW, "Bookings, oldest first."),
                "count": integer("Number of bookings.", minimum=0),
            }
        ),
        latency_ms=120.0,
    ),
    Tool(
        "get_booking",
        "Get one booking: what is booked, for whom, total, status and payment.",
        obj({"booking_id": _BOOKING_ID}),
        _BOOKING_VIEW,
        latency_ms=60.0,
    ),
    Tool(
        "cancel_booking",
        "Cancel a booking, releasing its seat or rooms; a paid booking is refunded in full.",
        obj({"booking_id": _BOOKING_ID}),
        obj(
            {
                "booking_id": _BOOKING_ID,
                "status": _STATUS,
                "refund_amount": _PRICE,
                "refunded_payment_id": {
                    "type": ["string", "null"],
                    "description": "The refunded payment, if the booking was paid.",
                },
            }
        ),
        writes=True,
        latency_ms=280.0,
    ),
    Tool(
        "pay_booking",
        "Pay a booking's total with a payment method; returns the new payment id.",
        obj({"booking_id": _BOOKING_ID, "payment_method": _METHOD}),
        obj(
            {
                "payment_id": _PAYMENT_ID,
                "booking_id": _BOOKING_ID,
                "amount": _PRICE,
                "method": _METHOD,
                "status": _STATUS,
            }
        ),
        writes=True,
        latency_ms=350.0,
    ),
    Tool(
        "get_payment",
        "Get one payment: its booking, method, amount and whether it was refunded.",
        obj({"payment_id": _PAYMENT_ID}),
        _PAYMENT_VIEW,
        latency_ms=60.0,
    ),
    Tool(
        "list_travellers",
        "List the travellers saved on the account, with ids, names and home airports.",
        obj({}),
        obj(
            {
                "travellers": array(_TRAVELLER_VIEW, "Saved travellers."),
                "count": integer("Number of travellers.", minimum=0),
            }
        ),
        latency_ms=80.0,
    ),
)
"""The travel tools, in the order the agent sees them."""
