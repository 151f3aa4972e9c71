"""The words the shop's catalogue is generated from: departments, product types, attributes.

Each product type fixes its category path, the attributes its products may have (phrased as
WebShop's attribute lists are: "machine wash", "gluten free") and its option groups (colour,
size, flavour, ...). Colours come from WebShop's normalisation list so its option matching
treats them as it would on real data.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProductType:
    """A kind of product: what every product of it shares."""

    name: str  # the noun phrase an instruction asks for ("t-shirt")
    department: str  # WebShop's top-level category (beauty, electronics, fashion, food, furniture)
    path: tuple[str, ...]  # the category path, top first
    attributes: tuple[str, ...]  # the pool a product draws 2-5 attributes from
    options: tuple[tuple[str, tuple[str, ...]], ...]  # option group -> its value pool
    price: tuple[float, float]  # the price range in dollars


APPAREL_COLOURS = (
    "black", "white", "navy", "gray", "red", "green", "beige", "burgundy", "olive",
    "khaki", "pink", "charcoal", "royal blue", "lavender", "teal", "mustard",
)  # fmt: skip
HOME_COLOURS = ("black", "white", "walnut", "gray", "natural", "espresso", "oak", "teal", "navy")
GADGET_COLOURS = ("black", "white", "silver", "blue", "rose gold", "red", "green", "purple")
APPAREL_SIZES = ("x-small", "small", "medium", "large", "x-large", "xx-large", "3x-large")
SHOE_SIZES = ("6", "6.5", "7", "7.5", "8", "8.5", "9", "9.5", "10", "10.5", "11", "12")
VOLUMES = ("2 fl oz", "4 fl oz", "8 fl oz", "12 fl oz", "16 fl oz", "32 fl oz")
PACKS = ("pack of 1", "pack of 2", "pack of 3", "pack of 4", "pack of 6", "pack of 12")
SCENTS = ("lavender", "unscented", "coconut", "vanilla", "eucalyptus", "citrus", "rose")
FLAVOURS = (
    "original", "vanilla", "chocolate", "peanut butter", "salted caramel", "mint",
    "mixed berry", "cinnamon",
)  # fmt: skip
LENGTHS = ("3 ft", "6 ft", "10 ft", "15 ft", "25 ft")

_FASHION = ("Clothing, Shoes & Jewelry",)
_BEAUTY = ("Beauty & Personal Care",)
_FOOD = ("Grocery & Gourmet Food",)
_HOME = ("Home & Kitchen", "Furniture")
_TECH = ("Electronics",)


def _t(
    name: str,
    department: str,
    path: tuple[str, ...],
    attributes: tuple[str, ...],
    options: tuple[tuple[str, tuple[str, ...]], ...],
    price: tuple[float, float],
) -> ProductType:
    return ProductType(name, department, path, attributes, options, price)


TYPES: tuple[ProductType, ...] = (
    # fashion
    _t("t-shirt", "fashion", (*_FASHION, "Men", "Clothing", "Shirts", "T-Shirts"),
       ("machine wash", "cotton", "short sleeve", "slim fit", "moisture wicking", "crew neck",
        "classic fit", "quick dry"),
       (("color", APPAREL_COLOURS), ("size", APPAREL_SIZES)), (8.0, 40.0)),
    _t("hoodie", "fashion", (*_FASHION, "Women", "Clothing", "Fashion Hoodies & Sweatshirts"),
       ("machine wash", "fleece lined", "long sleeve", "drawstring closure", "relaxed fit",
        "kangaroo pocket", "cotton blend"),
       (("color", APPAREL_COLOURS), ("size", APPAREL_SIZES)), (18.0, 70.0)),
    _t("jeans", "fashion", (*_FASHION, "Men", "Clothing", "Jeans"),
       ("machine wash", "straight leg", "stretch fabric", "button closure", "slim fit",
        "high waist", "relaxed fit"),
       (("color", ("denim", "black", "light blue", "dark blue", "gray", "stonewash")),
        ("size", ("28w x 30l", "30w x 30l", "32w x 32l", "34w x 32l", "36w x 34l"))),
       (20.0, 90.0)),
    _t("sneakers", "fashion", (*_FASHION, "Women", "Shoes", "Fashion Sneakers"),
       ("rubber sole", "lace up", "memory foam", "non slip", "breathable mesh", "lightweight"),
       (("color", APPAREL_COLOURS), ("size", SHOE_SIZES)), (25.0, 120.0)),
    _t("dress", "fashion", (*_FASHION, "Women", "Clothing", "Dresses"),
       ("hand wash", "v neck", "short sleeve", "flowy", "floral print", "elastic waist",
        "knee length"),
       (("color", APPAREL_COLOURS), ("size", APPAREL_SIZES)), (15.0, 80.0)),
    _t("socks", "fashion", (*_FASHION, "Men", "Clothing", "Socks"),
       ("machine wash", "cushioned", "moisture wicking", "arch support", "ankle length",
        "cotton"),
       (("color", APPAREL_COLOURS), ("size", ("small", "medium", "large", "x-large"))),
       (6.0, 30.0)),
    _t("rain jacket", "fashion", (*_FASHION, "Men", "Clothing", "Jackets & Coats"),
       ("water resistant", "zipper closure", "hooded", "packable", "windproof", "lightweight"),
       (("color", APPAREL_COLOURS), ("size", APPAREL_SIZES)), (30.0, 150.0)),
    _t("leggings", "fashion", (*_FASHION, "Women", "Clothing", "Active", "Leggings"),
       ("high waist", "tummy control", "squat proof", "pull on closure", "machine wash",
        "side pockets"),
       (("color", APPAREL_COLOURS), ("size", APPAREL_SIZES)), (12.0, 50.0)),
    # beauty
    _t("shampoo", "beauty", (*_BEAUTY, "Hair Care", "Shampoo & Conditioner", "Shampoos"),
       ("sulfate free", "paraben free", "natural ingredients", "dry hair", "cruelty free",
        "color treated"),
       (("scent", SCENTS), ("size", VOLUMES)), (6.0, 40.0)),
    _t("face moisturizer", "beauty", (*_BEAUTY, "Skin Care", "Face", "Moisturizers"),
       ("hyaluronic acid", "fragrance free", "sensitive skin", "oil free", "anti aging",
        "cruelty free"),
       (("size", VOLUMES),), (9.0, 60.0)),
    _t("lipstick", "beauty", (*_BEAUTY, "Makeup", "Lips", "Lipstick"),
       ("long lasting", "matte finish", "cruelty free", "vegan", "moisturizing"),
       (("color", ("red", "nude", "pink", "berry", "coral", "plum", "mauve")),
        ("size", PACKS[:3])), (5.0, 30.0)),
    _t("nail polish", "beauty", (*_BEAUTY, "Foot, Hand & Nail Care", "Nail Polish"),
       ("long lasting", "quick dry", "non toxic", "high gloss", "chip resistant"),
       (("color", ("red", "pink", "nude", "black", "coral", "lilac", "teal")),
        ("size", PACKS[:4])), (4.0, 25.0)),
    _t("body lotion", "beauty", (*_BEAUTY, "Skin Care", "Body", "Lotions"),
       ("dry skin", "shea butter", "non greasy", "paraben free", "natural ingredients"),
       (("scent", SCENTS), ("size", VOLUMES)), (5.0, 35.0)),
    _t("sunscreen", "beauty", (*_BEAUTY, "Skin Care", "Sunscreens & Tanning Products"),
       ("water resistant", "broad spectrum", "reef safe", "oil free", "fragrance free"),
       (("size", VOLUMES), ("pack", PACKS[:3])), (7.0, 35.0)),
    _t("hair dryer", "beauty", (*_BEAUTY, "Hair Care", "Styling Tools", "Hair Dryers"),
       ("ionic", "lightweight", "low noise", "fast drying", "cool shot", "foldable handle"),
       (("color", GADGET_COLOURS),), (20.0, 120.0)),
    # food
    _t("coffee beans", "food", (*_FOOD, "Beverages", "Coffee", "Whole Coffee Beans"),
       ("medium roast", "dark roast", "fair trade", "single origin", "usda organic",
        "low acid"),
       (("size", ("12 ounce", "1 pound", "2 pound", "5 pound")), ("pack", PACKS[:3])),
       (8.0, 60.0)),
    _t("green tea", "food", (*_FOOD, "Beverages", "Tea", "Green Tea"),
       ("usda organic", "caffeine free", "non gmo", "individually wrapped", "gluten free"),
       (("flavor", ("original", "jasmine", "mint", "lemon", "ginger")),
        ("size", ("20 count", "40 count", "100 count"))), (4.0, 30.0)),
    _t("protein bars", "food", (*_FOOD, "Snack Foods", "Bars", "Protein Bars"),
       ("gluten free", "high protein", "low sugar", "keto friendly", "non gmo",
        "plant based"),
       (("flavor", FLAVOURS), ("size", ("12 count", "15 count", "20 count"))), (12.0, 45.0)),
    _t("dark chocolate", "food", (*_FOOD, "Snack Foods", "Candy & Chocolate", "Chocolate"),
       ("fair trade", "usda organic", "dairy free", "low sugar", "individually wrapped",
        "gluten free"),
       (("flavor", ("sea salt", "orange", "mint", "almond", "raspberry", "original")),
        ("pack", PACKS)), (5.0, 40.0)),
    _t("olive oil", "food", (*_FOOD, "Pantry Staples", "Cooking Oils", "Olive Oil"),
       ("extra virgin", "cold pressed", "usda organic", "non gmo", "first harvest"),
       (("size", ("16.9 fl oz", "25.3 fl oz", "33.8 fl oz", "1 gallon")), ("pack", PACKS[:3])),
       (9.0, 55.0)),
    _t("trail mix", "food", (*_FOOD, "Snack Foods", "Nuts & Seeds", "Trail Mix"),
       ("resealable bag", "gluten free", "non gmo", "high protein", "no artificial flavors"),
       (("flavor", ("classic", "tropical", "chocolate", "cranberry", "honey")),
        ("size", ("8 ounce", "16 ounce", "26 ounce"))), (5.0, 30.0)),
    # furniture
    _t("office chair", "furniture", (*_HOME, "Home Office Furniture", "Home Office Chairs"),
       ("lumbar support", "adjustable height", "easy assemble", "breathable mesh",
        "swivel", "heavy duty"),
       (("color", HOME_COLOURS),), (60.0, 300.0)),
    _t("bookshelf", "furniture", (*_HOME, "Living Room Furniture", "Bookcases"),
       ("easy assemble", "engineered wood", "space saving", "storage space", "wall mounted",
        "metal frame"),
       (("color", HOME_COLOURS), ("size", ("3 tier", "4 tier", "5 tier"))), (35.0, 200.0)),
    _t("coffee table", "furniture", (*_HOME, "Living Room Furniture", "Tables", "Coffee Tables"),
       ("easy assemble", "storage space", "solid wood", "metal frame", "lift top",
        "mid century"),
       (("color", HOME_COLOURS),), (45.0, 260.0)),
    _t("bed frame", "furniture", (*_HOME, "Bedroom Furniture", "Beds, Frames & Bases"),
       ("easy assemble", "heavy duty", "metal frame", "storage space", "no box spring needed",
        "noise free"),
       (("color", HOME_COLOURS), ("size", ("twin", "full", "queen", "king"))), (80.0, 400.0)),
    _t("floor lamp", "furniture", (*_HOME, "Lighting", "Floor Lamps"),
       ("dimmable", "easy assemble", "energy saving", "remote control", "living room",
        "metal frame"),
       (("color", HOME_COLOURS),), (25.0, 150.0)),
    _t("bar stool", "furniture", (*_HOME, "Kitchen & Dining Room Furniture", "Bar Stools"),
       ("adjustable height", "swivel", "faux leather", "easy assemble", "footrest",
        "set of 2"),
       (("color", HOME_COLOURS),), (40.0, 220.0)),
    # electronics
    _t("wireless earbuds", "electronics", (*_TECH, "Headphones", "Earbud Headphones"),
       ("noise cancelling", "bluetooth 5.3", "long battery life", "water resistant",
        "wireless charging", "built in microphone"),
       (("color", GADGET_COLOURS),), (15.0, 180.0)),
    _t("phone case", "electronics", (*_TECH, "Cell Phones & Accessories", "Cases"),
       ("shock absorbing", "wireless charging", "slim fit", "screen protector",
        "kickstand", "drop protection"),
       (("color", GADGET_COLOURS), ("size", ("6.1 inch", "6.5 inch", "6.7 inch"))),
       (6.0, 40.0)),
    _t("usb c cable", "electronics", (*_TECH, "Computers & Accessories", "Cables", "USB Cables"),
       ("fast charging", "braided nylon", "high speed", "durable", "data transfer"),
       (("color", GADGET_COLOURS[:5]), ("length", LENGTHS)), (5.0, 25.0)),
    _t("bluetooth speaker", "electronics", (*_TECH, "Portable Audio & Video", "Speakers"),
       ("waterproof", "long battery life", "stereo sound", "built in microphone", "portable",
        "deep bass"),
       (("color", GADGET_COLOURS),), (20.0, 150.0)),
    _t("hdmi cable", "electronics", (*_TECH, "Television & Video", "Accessories", "Cables"),
       ("high speed", "4k", "gold plated", "braided nylon", "ethernet"),
       (("length", LENGTHS), ("pack", PACKS[:3])), (6.0, 30.0)),
    _t("laptop stand", "electronics", (*_TECH, "Computers & Accessories", "Laptop Stands"),
       ("adjustable height", "aluminum alloy", "foldable", "non slip", "heat dissipation",
        "portable"),
       (("color", GADGET_COLOURS[:4]),), (15.0, 70.0)),
)  # fmt: skip

# Brands are made of two syllables; a product's title starts with its brand, as on Amazon.
BRAND_HEADS = (
    "Nor", "Vel", "Kas", "Tru", "Ama", "Bel", "Cor", "Dal", "Eco", "Fin", "Gal", "Hal",
    "Ira", "Jun", "Kor", "Lum", "Mar", "Nex", "Orb", "Pax", "Qui", "Ros", "Sol", "Tal",
)  # fmt: skip
BRAND_TAILS = ("vale", "ora", "ix", "ton", "ly", "mo", "ant", "era", "ux", "ina", "wood", "co")

OPENINGS = (
    "Designed for everyday use,",
    "Made with care,",
    "A customer favourite,",
    "Built to last,",
    "Thoughtfully made,",
)
CLOSINGS = (
    "Backed by a 30-day return policy.",
    "Ships in recyclable packaging.",
    "Satisfaction guaranteed or your money back.",
    "Customer support is available seven days a week.",
)
REVIEW_BODIES = {
    5: ("Exactly as described, would buy again.", "Great quality for the price."),
    4: ("Good overall, arrived quickly.", "Works well, minor issues with packaging."),
    3: ("It is fine, nothing special.", "Okay, but not what I expected."),
    2: ("Quality could be better.", "Did not last as long as I hoped."),
    1: ("Disappointed, returned it.", "Not as pictured."),
}
INSTRUCTION_OPENINGS = (
    "i need",
    "i am looking for",
    "find me",
    "i want to buy",
    "get me",
)
