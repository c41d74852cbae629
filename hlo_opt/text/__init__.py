"""HLO text: the fast parser, the reference lark grammar (errors), the canonical printer."""
