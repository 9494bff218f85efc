package io.kvstash.tools;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The little JSON the command line needs, without a dependency: {@link #write(Object)} prints maps (in
 * their iteration order), lists, strings, numbers, booleans and null on one line; {@link #parse(String)}
 * reads it back (objects as {@link LinkedHashMap}, arrays as {@link ArrayList}, integers as {@link Long},
 * other numbers as {@link Double}). Enough for result lines between processes and {@code --json} output.
 */
public final class Json
{
    private final String text;
    private int position;

    private Json(final String text)
    {
        this.text = text;
    }

    /**
     * Prints a value as one line of JSON. Non-finite doubles print as null.
     *
     * @param value a map with string keys, list, string, number, boolean or null.
     * @return the JSON text.
     * @throws IllegalArgumentException for another type.
     */
    public static String write(final Object value)
    {
        final StringBuilder out = new StringBuilder(256);
        write(out, value);
        return out.toString();
    }

    private static void write(final StringBuilder out, final Object value)
    {
        if (null == value)
        {
            out.append("null");
        }
        else if (value instanceof String)
        {
            writeString(out, (String)value);
        }
        else if (value instanceof Double || value instanceof Float)
        {
            final double d = ((Number)value).doubleValue();
            out.append(Double.isFinite(d) ? Double.toString(d) : "null");
        }
        else if (value instanceof Number || value instanceof Boolean)
        {
            out.append(value);
        }
        else if (value instanceof Map)
        {
            out.append('{');
            boolean first = true;
            for (final Map.Entry<?, ?> e : ((Map<?, ?>)value).entrySet())
            {
                if (!first)
                {
                    out.append(',');
                }
                first = false;
                writeString(out, String.valueOf(e.getKey()));
                out.append(':');
                write(out, e.getValue());
            }
            out.append('}');
        }
        else if (value instanceof List)
        {
            out.append('[');
            boolean first = true;
            for (final Object o : (List<?>)value)
            {
                if (!first)
                {
                    out.append(',');
                }
                first = false;
                write(out, o);
            }
            out.append(']');
        }
        else
        {
            throw new IllegalArgumentException("cannot write " + value.getClass().getName() + " as JSON");
        }
    }

    private static void writeString(final StringBuilder out, final String s)
    {
        out.append('"');
        for (int i = 0; i < s.length(); i++)
        {
            final char c = s.charAt(i);
            switch (c)
            {
                case '"':
                    out.append("\\\"");
                    break;
                case '\\':
                    out.append("\\\\");
                    break;
                case '\n':
                    out.append("\\n");
                    break;
                case '\r':
                    out.append("\\r");
                    break;
                case '\t':
                    out.append("\\t");
                    break;
                default:
                    if (c < 0x20)
                    {
                        out.append(String.format("\\u%04x", (int)c));
                    }
                    else
                    {
                        out.append(c);
                    }
            }
        }
        out.append('"');
    }

    /**
     * Parses one JSON value.
     *
     * @param text JSON text.
     * @return the value.
     * @throws IllegalArgumentException when the text is not JSON; the message gives the position.
     */
    public static Object parse(final String text)
    {
        final Json parser = new Json(text);
        final Object value = parser.value();
        parser.skipWhitespace();
        if (parser.position != text.length())
        {
            throw parser.error("trailing characters");
        }
        return value;
    }

    /**
     * Parses a JSON object.
     *
     * @param text JSON text of an object.
     * @return the object's fields in order.
     * @throws IllegalArgumentException when the text is not a JSON object.
     */
    @SuppressWarnings("unchecked")
    public static Map<String, Object> parseObject(final String text)
    {
        final Object value = parse(text);
        if (!(value instanceof Map))
        {
            throw new IllegalArgumentException("not a JSON object: " + text);
        }
        return (Map<String, Object>)value;
    }

    private Object value()
    {
        skipWhitespace();
        if (position >= text.length())
        {
            throw error("unexpected end");
        }
        final char c = text.charAt(position);
        switch (c)
        {
            case '{':
                return object();
            case '[':
                return array();
            case '"':
                return string();
            case 't':
                return literal("true", Boolean.TRUE);
            case 'f':
                return literal("false", Boolean.FALSE);
            case 'n':
                return literal("null", null);
            default:
                return number();
        }
    }

    private Map<String, Object> object()
    {
        final Map<String, Object> map = new LinkedHashMap<>();
        position++;
        skipWhitespace();
        if (peek() == '}')
        {
            position++;
            return map;
        }
        while (true)
        {
            skipWhitespace();
            if (peek() != '"')
            {
                throw error("expected a field name");
            }
            final String key = string();
            skipWhitespace();
            expect(':');
            map.put(key, value());
            skipWhitespace();
            final char c = next();
            if (c == '}')
            {
                return map;
            }
            if (c != ',')
            {
                throw error("expected ',' or '}'");
            }
        }
    }

    private List<Object> array()
    {
        final List<Object> list = new ArrayList<>();
        position++;
        skipWhitespace();
        if (peek() == ']')
        {
            position++;
            return list;
        }
        while (true)
        {
            list.add(value());
            skipWhitespace();
            final char c = next();
            if (c == ']')
            {
                return list;
            }
            if (c != ',')
            {
                throw error("expected ',' or ']'");
            }
        }
    }

    private String string()
    {
        expect('"');
        final StringBuilder out = new StringBuilder();
        while (true)
        {
            final char c = next();
            if (c == '"')
            {
                return out.toString();
            }
            if (c != '\\')
            {
                out.append(c);
                continue;
            }
            final char e = next();
            switch (e)
            {
                case 'n':
                    out.append('\n');
                    break;
                case 'r':
                    out.append('\r');
                    break;
                case 't':
                    out.append('\t');
                    break;
                case 'b':
                    out.append('\b');
                    break;
                case 'f':
                    out.append('\f');
                    break;
                case 'u':
                    if (position + 4 > text.length())
                    {
                        throw error("short unicode escape");
                    }
                    out.append((char)Integer.parseInt(text.substring(position, position + 4), 16));
                    position += 4;
                    break;
                default:
                    out.append(e);
            }
        }
    }

    private Object number()
    {
        final int start = position;
        boolean integral = true;
        while (position < text.length())
        {
            final char c = text.charAt(position);
            if ((c >= '0' && c <= '9') || c == '-' || c == '+')
            {
                position++;
            }
            else if (c == '.' || c == 'e' || c == 'E')
            {
                integral = false;
                position++;
            }
            else
            {
                break;
            }
        }
        if (start == position)
        {
            throw error("unexpected character");
        }
        final String s = text.substring(start, position);
        try
        {
            return integral ? (Object)Long.valueOf(s) : (Object)Double.valueOf(s);
        }
        catch (final NumberFormatException ex)
        {
            throw error("bad number '" + s + "'");
        }
    }

    private Object literal(final String word, final Object value)
    {
        if (!text.startsWith(word, position))
        {
            throw error("unexpected token");
        }
        position += word.length();
        return value;
    }

    private void skipWhitespace()
    {
        while (position < text.length() && Character.isWhitespace(text.charAt(position)))
        {
            position++;
        }
    }

    private char peek()
    {
        return position < text.length() ? text.charAt(position) : '\0';
    }

    private char next()
    {
        if (position >= text.length())
        {
            throw error("unexpected end");
        }
        return text.charAt(position++);
    }

    private void expect(final char c)
    {
        if (next() != c)
        {
            position--;
            throw error("expected '" + c + "'");
        }
    }

    private IllegalArgumentException error(final String what)
    {
        return new IllegalArgumentException("bad JSON at " + position + ": " + what);
    }
}
