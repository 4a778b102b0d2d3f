"""Whether a letter is what it claims: DKIM signatures, Authentication-Results, the verdict, vouching for people."""
