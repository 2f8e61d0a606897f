package sql92

import (
	"strings"

	"github.com/quivermq/quiver/core/message"
)

// kind is the Java class of a value in RocketMQ's evaluator: property
// values are String, integer literals Integer (when they fit) or Long,
// float literals Double, and boolean expressions Boolean or null.
type kind uint8

const (
	kNull kind = iota
	kBool
	kInt  // java.lang.Integer
	kLong // java.lang.Long
	kDouble
	kString
	// kErr is a Java exception (a NumberFormatException while converting
	// a property, a ClassCastException): it aborts the whole evaluation
	// and the message does not match (ExpressionMessageFilter catches it).
	kErr
)

// value is one evaluated operand. It is passed by value, so evaluating
// never allocates.
type value struct {
	k kind
	b bool
	i int64
	f float64
	s string
}

var (
	vNull  = value{k: kNull}
	vTrue  = value{k: kBool, b: true}
	vFalse = value{k: kBool}
	vErr   = value{k: kErr}
)

func boolv(b bool) value {
	if b {
		return vTrue
	}
	return vFalse
}

func (v value) numeric() bool { return v.k == kInt || v.k == kLong || v.k == kDouble }

// node is a compiled expression. Nodes are immutable after Compile, so a
// tree may be evaluated by any number of goroutines.
type node interface {
	eval(p message.Properties) value
}

// javaCompare is RocketMQ's ComparisonExpression.__compare with
// convertStringExpressions on (SelectorParser.parse always sets it): values
// of different classes are converted towards the other side's class, a
// String to the number class of the other side. ok is false where Java
// throws. Neither side is null.
func javaCompare(l, r value) (c int, ok bool) {
	if l.k == r.k {
		switch l.k {
		case kBool:
			return cmpBool(l.b, r.b), true
		case kInt, kLong:
			return cmpInt(l.i, r.i), true
		case kDouble:
			return cmpDouble(l.f, r.f), true
		case kString:
			return strings.Compare(l.s, r.s), true
		}
		return -1, true
	}
	switch l.k {
	case kBool:
		if r.k == kString {
			// Boolean.valueOf((String) lv) on a Boolean: ClassCastException.
			return 0, false
		}
	case kInt, kLong:
		switch r.k {
		case kInt, kLong:
			return cmpInt(l.i, r.i), true
		case kDouble:
			return cmpDouble(float64(l.i), r.f), true
		case kString:
			v, ok := parseJavaInt(r.s, l.k == kInt)
			if !ok {
				return 0, false
			}
			return cmpInt(l.i, v), true
		}
	case kDouble:
		switch r.k {
		case kInt, kLong:
			return cmpDouble(l.f, float64(r.i)), true
		case kString:
			v, ok := parseJavaDouble(r.s)
			if !ok {
				return 0, false
			}
			return cmpDouble(l.f, v), true
		}
	case kString:
		switch r.k {
		case kBool:
			return cmpBool(javaBool(l.s), r.b), true
		case kInt, kLong:
			v, ok := parseJavaInt(l.s, r.k == kInt)
			if !ok {
				return 0, false
			}
			return cmpInt(v, r.i), true
		case kDouble:
			v, ok := parseJavaDouble(l.s)
			if !ok {
				return 0, false
			}
			return cmpDouble(v, r.f), true
		}
	}
	// Incomparable classes: __compare answers -1.
	return -1, true
}

// constNode is a literal (or a folded negation of one).
type constNode struct{ v value }

func (n *constNode) eval(message.Properties) value { return n.v }

// propNode is a property: its String value, or null when absent.
type propNode struct{ name string }

func (n *propNode) eval(p message.Properties) value {
	s, ok := p[n.name]
	if !ok {
		return vNull
	}
	return value{k: kString, s: s}
}

// negNode is UnaryExpression.createNegate: numbers are negated, anything
// else (a String property, a Boolean) is null.
type negNode struct{ x node }

func (n *negNode) eval(p message.Properties) value { return negate(n.x.eval(p)) }

func negate(v value) value {
	switch v.k {
	case kErr:
		return v
	case kInt, kLong:
		v.i = -v.i
		return v
	case kDouble:
		v.f = -v.f
		return v
	}
	return vNull
}

// boolCastNode is UnaryExpression.createBooleanCast, applied to a
// property used as a condition: null when absent, otherwise FALSE (a
// property value is a String, never a Boolean).
type boolCastNode struct{ x node }

func (n *boolCastNode) eval(p message.Properties) value {
	v := n.x.eval(p)
	switch v.k {
	case kErr, kNull, kBool:
		return v
	}
	return vFalse
}

// notNode is UnaryExpression.createNOT: null stays null.
type notNode struct{ x node }

func (n *notNode) eval(p message.Properties) value {
	v := n.x.eval(p)
	if v.k == kBool {
		v.b = !v.b
	}
	return v
}

// andNode is a chain of LogicExpression.createAND, flattened: it stops at
// the first FALSE (or exception); otherwise null if any operand was null.
type andNode struct{ xs []node }

func (n *andNode) eval(p message.Properties) value {
	null := false
	for _, x := range n.xs {
		v := x.eval(p)
		switch v.k {
		case kBool:
			if !v.b {
				return vFalse
			}
		case kNull:
			null = true
		default:
			return vErr
		}
	}
	if null {
		return vNull
	}
	return vTrue
}

// orNode is a chain of LogicExpression.createOR, flattened: it stops at
// the first TRUE (or exception); otherwise null if any operand was null.
type orNode struct{ xs []node }

func (n *orNode) eval(p message.Properties) value {
	null := false
	for _, x := range n.xs {
		v := x.eval(p)
		switch v.k {
		case kBool:
			if v.b {
				return vTrue
			}
		case kNull:
			null = true
		default:
			return vErr
		}
	}
	if null {
		return vNull
	}
	return vFalse
}

// eqNode is ComparisonExpression.doCreateEqual ('=', and IS NULL against
// the NULL constant): both null is TRUE, a null left side is null, a null
// right side is FALSE; otherwise __compare(...) == 0.
type eqNode struct{ l, r node }

func (n *eqNode) eval(p message.Properties) value {
	l := n.l.eval(p)
	if l.k == kErr {
		return l
	}
	r := n.r.eval(p)
	if r.k == kErr {
		return r
	}
	return equal(l, r)
}

func equal(l, r value) value {
	if l.k == kNull || r.k == kNull {
		switch {
		case l.k == r.k:
			return vTrue
		case l.k == kNull:
			return vNull
		}
		return vFalse
	}
	c, ok := javaCompare(l, r)
	if !ok {
		return vErr
	}
	return boolv(c == 0)
}

// propEqStrNode is eqNode for a property and a string literal, the most
// common comparison: String.equals, null when the property is absent.
type propEqStrNode struct{ name, s string }

func (n *propEqStrNode) eval(p message.Properties) value {
	s, ok := p[n.name]
	if !ok {
		return vNull
	}
	return boolv(s == n.s)
}

// isNullNode is IS NULL: TRUE exactly when the operand is null.
type isNullNode struct{ x node }

func (n *isNullNode) eval(p message.Properties) value {
	v := n.x.eval(p)
	if v.k == kErr {
		return v
	}
	return boolv(v.k == kNull)
}

type cmpOp uint8

const (
	opGT cmpOp = iota
	opGE
	opLT
	opLE
)

func (op cmpOp) String() string { return [...]string{">", ">=", "<", "<="}[op] }

func (op cmpOp) holds(c int) bool {
	switch op {
	case opGT:
		return c > 0
	case opGE:
		return c >= 0
	case opLT:
		return c < 0
	}
	return c <= 0
}

// cmpNode is ComparisonExpression's >, >=, < and <=: null if either side
// is null (the right side is not evaluated when the left is null); two
// Strings are both converted with Double.valueOf; otherwise __compare.
type cmpNode struct {
	op   cmpOp
	l, r node
}

func (n *cmpNode) eval(p message.Properties) value {
	l := n.l.eval(p)
	if l.k == kErr || l.k == kNull {
		return l
	}
	r := n.r.eval(p)
	if r.k == kErr || r.k == kNull {
		return r
	}
	return compareOrdered(n.op, l, r)
}

func compareOrdered(op cmpOp, l, r value) value {
	var c int
	if l.k == kString && r.k == kString {
		lf, ok := parseJavaDouble(l.s)
		if !ok {
			return vErr
		}
		rf, ok := parseJavaDouble(r.s)
		if !ok {
			return vErr
		}
		c = cmpDouble(lf, rf)
	} else {
		var ok bool
		if c, ok = javaCompare(l, r); !ok {
			return vErr
		}
	}
	return boolv(op.holds(c))
}

// propCmpNumNode is cmpNode for a property and a number literal (the
// common "a > 5"): the property is parsed only here, with the literal's
// class (Integer.valueOf, Long.valueOf or Double.valueOf).
type propCmpNumNode struct {
	op   cmpOp
	name string
	c    value
}

func (n *propCmpNumNode) eval(p message.Properties) value {
	s, ok := p[n.name]
	if !ok {
		return vNull
	}
	var c int
	switch n.c.k {
	case kDouble:
		f, ok := parseJavaDouble(s)
		if !ok {
			return vErr
		}
		c = cmpDouble(f, n.c.f)
	default:
		i, ok := parseJavaInt(s, n.c.k == kInt)
		if !ok {
			return vErr
		}
		c = cmpInt(i, n.c.i)
	}
	return boolv(n.op.holds(c))
}

// inNode is UnaryExpression.createInExpression on a property: null when
// absent, otherwise membership (negated for NOT IN).
type inNode struct {
	name string
	list []string            // short lists: linear scan
	set  map[string]struct{} // long lists
	not  bool
}

func (n *inNode) eval(p message.Properties) value {
	s, ok := p[n.name]
	if !ok {
		return vNull
	}
	var found bool
	if n.set != nil {
		_, found = n.set[s]
	} else {
		for _, e := range n.list {
			if e == s {
				found = true
				break
			}
		}
	}
	return boolv(found != n.not)
}

type strOp uint8

const (
	opContains strOp = iota
	opStartsWith
	opEndsWith
)

func (op strOp) String() string { return [...]string{"CONTAINS", "STARTSWITH", "ENDSWITH"}[op] }

// strOpNode is RocketMQ 5's CONTAINS, STARTSWITH and ENDSWITH and their
// NOT forms. Unlike the comparisons they never answer null: an empty
// search string, a null or a non-String operand are all FALSE, for the NOT
// forms too.
type strOpNode struct {
	op     strOp
	x      node
	search string
	not    bool
}

func (n *strOpNode) eval(p message.Properties) value {
	if n.search == "" {
		return vFalse
	}
	v := n.x.eval(p)
	if v.k == kErr {
		return v
	}
	if v.k != kString {
		return vFalse
	}
	var ok bool
	switch n.op {
	case opContains:
		ok = strings.Contains(v.s, n.search)
	case opStartsWith:
		ok = strings.HasPrefix(v.s, n.search)
	default:
		ok = strings.HasSuffix(v.s, n.search)
	}
	return boolv(ok != n.not)
}
